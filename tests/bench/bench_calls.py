"""GitLab API calls per change, each order, counted by the GitLab double; and changes per minute.

Usage: .venv/bin/python -m tests.bench.bench_calls [--changes 50]

1. One change per order from submission to VALIDATED with every webhook in time, the outbox
   dispatched (status comment and label writes included): the calls the double answered, by
   kind (target: at most 22 per change with the integrity check, 20 before it; 0 poll reads
   for a wait whose webhook came in time). Changes are submitted through the REST API as a
   portal does, so the read of the project's `.gitops/bot.yml` at submission (on by default,
   GITOPS_POLICY_FILES) is counted.
2. `--changes` changes per order pushed through the whole flow at once, in this process,
   against the double with zero latency: changes per minute.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import fakeredis
import responses

from bot.core.states import BindingState, Flow
from bot.store.engine import make_engine
from bot.store.flags import set_flag
from bot.store.migrate import upgrade
from jobs.outbox import dispatch
from tests.workflow.harness import PROJECT, Bot

#: The REST API's bearer token in the harness.
API_AUTH = {"Authorization": "Bearer api-token"}


def kind(method: str, path: str) -> str:
    """A call's kind: method and path with ids replaced."""
    parts = ["{id}" if part.isdigit() else part for part in path.split("/")]
    return f"{method} {'/'.join(parts[3:]) if len(parts) > 3 else path}"


#: GitLab's merge methods: merge commit (the double's default), semi-linear, fast-forward.
METHODS = ("merge", "rebase_merge", "ff")


def submit_api(
    bot: Bot, flow: Flow, subject_id: str, path: str = "config/prod.yaml", title: str = ""
) -> str:
    """POST /api/v1/changes writing `path` (the order flag set to `flow` first, as an operator
    would), answered 202; the operation id."""
    set_flag(bot.services.engine, "workflow.order", flow.value)
    body = {
        "subject_id": subject_id,
        "target_key": path,
        "project": PROJECT,
        "target_branch": "main",
        "title": title or f"Scale {subject_id}",
        "requested_by": "alice",
        "files": [{"path": path, "content": "replicas: 3\n"}],
    }
    answer = bot.client.post("/api/v1/changes", json=body, headers=API_AUTH)
    assert answer.status_code == 202, answer.get_json()
    return str(answer.get_json()["operation_id"])


def one_change(bot: Bot, flow: Flow, n: int) -> tuple[int, Counter[str]]:
    """Calls made for one change of this flow, webhooks in time, outbox dispatched."""
    start = len(bot.gitlab.calls)
    op_id = submit_api(bot, flow, f"svc-{flow.value}-{n}")
    steps = (
        [bot.approve, None, bot.pass_pipeline, None, bot.deployed]
        if flow is Flow.APPROVE_FIRST
        else [None, bot.pass_pipeline, None, bot.approve, None, bot.deployed]
    )
    bot.settle()
    for step in steps:
        if step is not None:
            step(op_id)
        bot.settle()
        dispatch()
    assert bot.state(op_id) is BindingState.VALIDATED, bot.state(op_id)
    calls = bot.gitlab.calls[start:]
    return len(calls), Counter(kind(c.method, c.path) for c in calls)


def measure(changes: int = 50) -> dict[str, Any]:
    """The figures of this benchmark."""
    figures: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        responses.RequestsMock(assert_all_requests_are_fired=False) as rsps,
    ):
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}")
        upgrade(engine)
        bot = Bot(engine, fakeredis.FakeRedis(), rsps)  # policy files on, as by default
        # the project as the bot is meant to run on it: GitLab's approval rule asks for the
        # approver accounts (doctor's "approve" check), `gitops/*` protected as `hooks install`
        # does (so GitLab keeps a merged bot branch and the bot deletes it)
        bot.gitlab.project(PROJECT).required_approvals = 2
        bot.gitlab.protect_branch(PROJECT, "gitops/*", push=("gitops-bot",), allow_force_push=True)
        try:
            for method in METHODS[1:]:  # the happy path on the other merge methods
                bot.gitlab.set_merge_method(PROJECT, method)
                for flow in Flow:
                    one_change(bot, flow, 0)
                    figures[f"calls_{method}_{flow.value}"] = one_change(bot, flow, 1)[0]
            bot.gitlab.set_merge_method(PROJECT, METHODS[0])
            for flow in Flow:
                one_change(bot, flow, 0)  # warm up (first GET /user per account, caches)
                total, kinds = one_change(bot, flow, 1)
                polls = sum(
                    v
                    for k, v in kinds.items()
                    if k.startswith("GET") and k.endswith("merge_requests/{id}")
                )
                figures[f"calls_{flow.value}"] = total
                figures[f"kinds_{flow.value}"] = dict(sorted(kinds.items()))
                figures[f"mr_reads_{flow.value}"] = polls
            started = time.perf_counter()
            ops = [
                submit_api(bot, flow, f"many-{flow.value}-{i}")
                for i in range(changes)
                for flow in Flow
            ]
            bot.settle()
            for _ in range(3):
                for op_id in ops:
                    state = bot.state(op_id)
                    if state is BindingState.APPROVAL_SENT:
                        bot.approve(op_id)
                    elif state is BindingState.MR_CREATING:
                        bot.pass_pipeline(op_id)
                    elif state is BindingState.MERGED:
                        bot.deployed(op_id)
                bot.settle()
                dispatch(limit=10_000)
            for _ in range(3):
                for op_id in ops:
                    if bot.state(op_id) is BindingState.MERGED:
                        bot.deployed(op_id)
                    elif bot.state(op_id) is BindingState.APPROVAL_SENT:
                        bot.approve(op_id)
                bot.settle()
            seconds = time.perf_counter() - started
            done = sum(bot.state(op_id) is BindingState.VALIDATED for op_id in ops)
            figures["throughput_changes"] = done
            figures["throughput_seconds"] = seconds
            figures["changes_per_minute"] = done / seconds * 60
        finally:
            bot.close()
            engine.dispose()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=50)
    args = parser.parse_args()
    figures = measure(args.changes)
    for flow in Flow:
        print(
            f"{flow.value}: {figures[f'calls_{flow.value}']} GitLab calls per change "
            f"(target <= 22), MR reads {figures[f'mr_reads_{flow.value}']}"
        )
        for name, count in figures[f"kinds_{flow.value}"].items():
            print(f"    {count:3}  {name}")
    for method in METHODS[1:]:
        for flow in Flow:
            calls = figures[f"calls_{method}_{flow.value}"]
            print(f"{flow.value} ({method}): {calls} GitLab calls per change (target <= 22)")
    print(
        f"{figures['throughput_changes']} changes VALIDATED in "
        f"{figures['throughput_seconds']:.1f} s: {figures['changes_per_minute']:.0f} per minute"
    )


if __name__ == "__main__":
    main()
