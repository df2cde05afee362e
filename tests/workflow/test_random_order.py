"""A change's deliveries in random order, duplicated and dropped, with the sweep and
reconciliation running: every request ends as the in-order run ends, by table transitions only,
with one MR, one merge and one approval per account."""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from bot.app.reconcile import run_reconcile
from bot.app.sweep import run_sweep
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.core.table import TABLE
from bot.store.models import AUDIT, utcnow
from tests.builders import operation
from tests.workflow.harness import Bot

#: 1,000 random orders per CI run (RELIABILITY.md) on the embedded pass; the PostgreSQL pass,
#: slower per example, runs 200 more; GITOPS_RANDOM_EXAMPLES=10000 is the longer run.
EXAMPLES = int(
    os.environ.get(
        "GITOPS_RANDOM_EXAMPLES", "200" if os.environ.get("GITOPS_TEST_DATABASE_URL") else "1000"
    )
)
LEGAL = {(r.source.value if r.source else None, r.event.value, r.target.value) for r in TABLE}

# What the outside world says about one change, in the order it would say it.
DELIVERIES = ("approval", "pipeline", "deploy")


def deliver(bot: Bot, op_id: str, what: str, *, hook: bool = True) -> bool:
    """Sends one copy of a delivery if what it refers to exists yet; False if it cannot yet.

    For the pipeline, `hook=False` finishes it without GitLab's webhook (a lost delivery)."""
    op = operation(bot.services.engine, op_id)
    if what == "approval":
        if not bot.approvals.submitted:
            return False
        bot.approve(op_id)
    elif what == "pipeline":
        if op["mr_iid"] is None:
            return False
        bot.pass_pipeline(op_id, deliver=hook)
    elif what == "deploy":
        if op["merge_commit_sha"] is None:
            return False
        bot.deployed(op_id)
    return True


def where_it_stopped(bot: Bot, op_id: str) -> str:
    """What a change that did not end VALIDATED was doing: its row's step, deadline, lease,
    attempts and progress, its audit trail, and the queued and scheduled jobs."""
    db = bot.services.engine
    op = operation(db, op_id)
    keep = ("step", "version", "deadline_at", "lease_owner", "lease_until", "attempts", "progress")
    with db.connect() as conn:
        trail = conn.execute(
            select(AUDIT.c.from_state, AUDIT.c.event, AUDIT.c.to_state, AUDIT.c.detail)
            .where(AUDIT.c.operation_id == op_id)
            .order_by(AUDIT.c.id)
        ).all()
    return "\n".join(
        (
            f"now {utcnow().isoformat()}",
            *(f"{key}: {op[key]!r}" for key in keep),
            *(f"audit: {tuple(row)}" for row in trail),
            f"jobs: {bot.worker.pending()}",
        )
    )


schedules = st.lists(
    st.tuples(
        st.sampled_from(("deliver", "duplicate", "drop", "jobs", "sweep")),
        st.sampled_from(DELIVERIES),
    ),
    max_size=25,
)


#: Half of the orders per step order: two tests, so the suite's two workers share them.
PER_FLOW = settings(
    max_examples=max(1, EXAMPLES // 2),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PER_FLOW
@given(schedule=schedules)
def test_random_order_approve_first(bot: Bot, schedule: list[tuple[str, str]]) -> None:
    """Approve-first: whatever the order, duplicates and drops, the request ends VALIDATED."""
    run_in_random_order(bot, Flow.APPROVE_FIRST, schedule)


@PER_FLOW
@given(schedule=schedules)
def test_random_order_mr_first(bot: Bot, schedule: list[tuple[str, str]]) -> None:
    """MR-first: whatever the order, duplicates and drops, the request ends VALIDATED."""
    run_in_random_order(bot, Flow.MR_FIRST, schedule)


def run_in_random_order(bot: Bot, flow: Flow, schedule: list[tuple[str, str]]) -> None:
    """Delivers a change's events in `schedule`'s order (duplicates, drops, jobs and sweeps
    between); asserts it ends VALIDATED by table transitions only, with one MR, one merge and
    one approval per account."""
    db = bot.services.engine
    bot.approvals.submitted.clear()
    op_id = bot.request(flow, subject_id=f"svc-{os.urandom(6).hex()}")
    calls_before = len(bot.gitlab.calls)
    sent: set[str] = set()
    for action, what in schedule:
        if action == "jobs":
            bot.settle(advance=10)
        elif action == "sweep":
            run_sweep(bot.services, utcnow() + timedelta(hours=1))
        elif action == "drop":
            if what == "pipeline" and deliver(bot, op_id, what, hook=False):
                sent.add(what)  # the pipeline finished; its webhook is lost
            continue  # a callback's copy never arrives (its sender tries again)
        elif deliver(bot, op_id, what):
            sent.add(what)
            if action == "duplicate":
                deliver(bot, op_id, what)
    # callbacks are at-least-once; the pipeline finishes (a lost hook: the polls see it)
    for _ in range(5):
        if bot.state(op_id) is S.VALIDATED:
            break
        for what in DELIVERIES:
            if what not in sent and deliver(bot, op_id, what, hook=False):
                sent.add(what)
        bot.settle(advance=12)
        run_sweep(bot.services, utcnow() + timedelta(hours=2))
        bot.settle(advance=12)
        run_reconcile(db, utcnow() + timedelta(hours=1), min_age=120, max_age=86400)
    assert bot.state(op_id) is S.VALIDATED, where_it_stopped(bot, op_id)
    with db.connect() as conn:
        steps = conn.execute(
            select(AUDIT.c.from_state, AUDIT.c.event, AUDIT.c.to_state).where(
                AUDIT.c.operation_id == op_id, AUDIT.c.version > 0
            )
        ).all()
    assert {tuple(s) for s in steps} <= LEGAL
    assert len(steps) == operation(db, op_id)["version"]
    mr = f"/merge_requests/{operation(db, op_id)['mr_iid']}"
    mine = bot.gitlab.calls[calls_before:]
    assert len([c for c in mine if c.method == "POST" and c.path.endswith("/merge_requests")]) == 1
    assert len([c for c in mine if c.path.endswith(f"{mr}/merge") and c.status == 200]) == 1
    assert len([c for c in mine if c.path.endswith(f"{mr}/approve") and c.status == 201]) == 2
