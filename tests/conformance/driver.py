"""Drives changes through the bot and a GitLab double the way GitLab and people would: the
approval system answers, GitLab finishes rebases and pipelines (sending their hooks) and runs
its asynchronous jobs, the deployment reports -- until every change has ended, or a round
limit says the bot stalled. No sleeps: the bot's jobs run on its own schedule (`settle`), the
double's jobs when told."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from bot.core.states import TERMINAL, BindingState
from sim.gitlab.model import RUNNING_STATUSES
from tests.builders import operation
from tests.workflow.harness import PROJECT, SECRETS, Bot

#: States a driven change may end in: terminal or failed.
ENDED = frozenset({*TERMINAL, BindingState.CREATE_FAILED, BindingState.HANDLE_FAILED})


def submit(bot: Bot, n: int, *, first: int = 0, **kw: Any) -> list[str]:
    """n changes to `main`, each its own file; their operation ids."""
    return [
        bot.request(
            subject_id=f"svc-{i}",
            target_key=f"config/svc-{i}.yaml",
            title=f"Scale svc-{i}",
            files=[{"path": f"config/svc-{i}.yaml", "content": f"replicas: {i + 2}\n"}],
            **kw,
        )
        for i in range(first, first + n)
    ]


def deliver_pipeline(bot: Bot, iid: int, pipeline_id: int) -> None:
    """GitLab's Pipeline Hook for the pipeline, as it is now."""
    headers, body = bot.gitlab.webhook(
        "pipeline", project=PROJECT, iid=iid, pipeline_id=pipeline_id, token=SECRETS["webhook"]
    )
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code < 300


def _gitlab_round(bot: Bot, ops: Iterable[str], failing: Collection[str]) -> None:
    """What GitLab and the people around it do in one round, for each change's MR."""
    engine = bot.services.engine
    for op_id in ops:
        row = operation(engine, op_id)
        state = bot.state(op_id)
        if state is BindingState.APPROVAL_SENT:
            assert bot.approve(op_id) == 202
        if state is BindingState.MERGED:
            assert bot.deployed(op_id) == 202
        iid = row["mr_iid"]
        if iid is None:
            continue
        mr = bot.gitlab.mr(PROJECT, iid)
        if mr.rebase_in_progress:
            bot.gitlab.complete_rebase(PROJECT, iid, ok=True)
        pipeline = bot.gitlab.latest_pipeline(PROJECT, iid)
        if pipeline is not None and pipeline.status in RUNNING_STATUSES:
            bot.gitlab.set_pipeline(
                PROJECT, pipeline.id, "failed" if op_id in failing else "success"
            )
            bot.gitlab.run_effects(project=PROJECT)  # the head pipeline attached, rechecked
            deliver_pipeline(bot, iid, pipeline.id)
    bot.gitlab.run_effects(project=PROJECT)


def drive(
    bot: Bot,
    ops: list[str],
    *,
    failing: Collection[str] = (),
    until: Collection[BindingState] = (BindingState.VALIDATED,),
    rounds: int = 60,
) -> dict[str, BindingState]:
    """Runs rounds until every change is in `until` or has ended otherwise; their states."""
    for _ in range(rounds):
        _gitlab_round(bot, ops, failing)
        bot.settle(advance=30)
        states = {op_id: bot.state(op_id) for op_id in ops}
        if all(s in until or s in ENDED for s in states.values()):
            return states
    return {op_id: bot.state(op_id) for op_id in ops}
