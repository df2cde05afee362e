"""The log lines of a change as the processes write them: each names the change (operation,
project, MR, the delivery or request that started the work, the step), nothing bound leaks from
one job to the next, RQ's per-job lines stay out unless asked for, and no secret is written."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from sqlalchemy import select

from bot import logs
from bot.config import LogSettings, Settings
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.services import Services
from bot.store.flags import set_flag
from bot.store.models import INBOX
from gitops_bot import runner
from jobs.inprocess import InProcess
from jobs.queue import RQWorkQueue
from jobs.worker import ServicesWorker
from tests.api import change_body
from tests.builders import operation
from tests.logcapture import captured
from tests.workflow.harness import PROJECT, SECRETS, Bot

API = {"Authorization": "Bearer api-token"}
#: Every credential the harness's bot runs with.
CREDENTIALS = [
    *SECRETS.values(),
    "api-token",
    "author-token",
    "approver-1-token",
    "approver-2-token",
]

log = logging.getLogger("tests.jobs")


def submit(bot: Bot, key: str) -> str:
    """A change submitted through the API with `key` as its Idempotency-Key; its id."""
    answer = bot.client.post(
        "/api/v1/changes", json=change_body(), headers={**API, "Idempotency-Key": key}
    )
    assert answer.status_code == 202, answer.json
    assert answer.json is not None
    return str(answer.json["operation_id"])


def pipeline_delivery_key(bot: Bot) -> str:
    """The stored key of the pipeline webhook delivery."""
    with bot.services.engine.connect() as conn:
        keys = conn.execute(
            select(INBOX.c.delivery_key).where(INBOX.c.event_type == "Pipeline Hook")
        ).all()
    assert len(keys) == 1
    return str(keys[0][0])


def test_each_line_about_a_change_names_the_change_the_delivery_and_the_step(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MR first through the API (Idempotency-Key k-logs), then its pipeline's webhook: the
    API's line, the MR step's line (in a job) and the approval step's line (in the job the
    webhook led to) carry operation_id, project, step, mr_iid once the MR is open, and the key
    of what started the work as correlation_id."""
    set_flag(bot.services.engine, "workflow.order", Flow.MR_FIRST.value)
    with captured(monkeypatch, role="worker") as lines:
        op_id = submit(bot, "k-logs")
        bot.settle()
        bot.pass_pipeline(op_id)
        bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    mr_iid = operation(bot.services.engine, op_id)["mr_iid"]
    by_event = {line["event"]: line for line in lines.about(op_id)}

    accepted = by_event["change accepted"]
    assert accepted["logger"] == "bot.app.submit"
    assert (accepted["correlation_id"], accepted["project"]) == ("k-logs", PROJECT)

    ready = by_event["change ready"]
    assert ready["logger"] == "bot.gitlab.changes"
    assert (ready["correlation_id"], ready["project"], ready["step"]) == (
        "k-logs",
        PROJECT,
        "create_mr",
    )

    submitted = by_event["approval submitted"]
    assert submitted["logger"] == "bot.approval.client"
    assert submitted["correlation_id"] == pipeline_delivery_key(bot)
    assert (submitted["project"], submitted["mr_iid"], submitted["step"]) == (
        PROJECT,
        mr_iid,
        "submit_approval",
    )
    for line in lines.json():
        assert {"time", "level", "logger", "event", "role", "pid"} <= set(line)


def test_no_secret_is_written_in_a_whole_change_at_debug(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change from submission to VALIDATED, deliveries refused for a wrong secret, with every
    logger at DEBUG: no credential the bot runs with is in any line."""
    everything = LogSettings(format="json", level="DEBUG", rq_level="DEBUG")
    with captured(monkeypatch, settings=everything) as lines:
        op_id = bot.request(Flow.APPROVE_FIRST)
        bot.settle()
        for path, wrong in (
            ("/webhooks/gitlab", {"X-Gitlab-Token": "hook-secretx", "X-Gitlab-Event": "Note Hook"}),
            ("/webhooks/deploy", {"X-Deploy-Token": "deploy-secretx"}),
            ("/api/v1/changes", {"Authorization": "Bearer api-tokenx"}),
        ):
            refused = bot.client.post(path, data=b"{}", headers=wrong)
            assert refused.status_code == 401, (path, refused.status_code)
        bot.approve(op_id)
        bot.settle()
        bot.pass_pipeline(op_id)
        bot.settle()
        bot.deployed(op_id)
        bot.settle()
    assert bot.state(op_id) is S.VALIDATED
    assert len(lines.json()) >= 10  # something was written to search
    for secret in CREDENTIALS:
        assert secret not in lines.text


# -- jobs: nothing leaks from one to the next -------------------------------------------------

SEEN: list[dict[str, Any]] = []


def binding_job(operation_id: str) -> None:
    """A job that binds keys for the rest of itself and logs."""
    logs.bind(operation_id=operation_id, step="handle")
    log.info("first job")


def plain_job() -> None:
    """A job that binds nothing and logs."""
    log.info("second job")


def bare_services() -> Services:
    """Services on fakeredis with no database (these jobs use none)."""
    redis = fakeredis.FakeRedis()
    return Services(settings=Settings(), engine=None, queue=RQWorkQueue(redis), redis=redis)  # type: ignore[arg-type]


@pytest.mark.parametrize("runner_kind", ["worker", "in-process"])
def test_nothing_bound_in_one_job_reaches_the_next(
    monkeypatch: pytest.MonkeyPatch, runner_kind: str
) -> None:
    """A job enqueued while a correlation id is bound carries it and binds more; the next job,
    enqueued with nothing bound, logs with neither (the `worker` process and the in-process
    runner alike)."""
    services = bare_services()
    with logs.scope(correlation_id="approval:cb-1"):
        services.queue.enqueue(f"{__name__}.binding_job", "op-9", job_id="drive:op-9")
    services.queue.enqueue(f"{__name__}.plain_job", job_id="plain")
    with captured(monkeypatch) as lines:
        if runner_kind == "worker":
            ServicesWorker(services).work(burst=True, logging_level="WARNING")
        else:
            assert InProcess(services).burst() == 2
    first, second = (line for line in lines.json() if line["logger"] == "tests.jobs")
    assert (first["event"], first["operation_id"], first["correlation_id"], first["step"]) == (
        "first job",
        "op-9",
        "approval:cb-1",
        "handle",
    )
    assert second["event"] == "second job"
    assert not {"operation_id", "correlation_id", "step"} & set(second)


# -- RQ's own lines -------------------------------------------------------------------------


@pytest.mark.parametrize("rq_level", [None, "INFO"])
def test_rq_per_job_lines_are_held_back_unless_asked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rq_level: str | None
) -> None:
    """`gitops-bot worker` running a job: by default none of RQ's INFO lines (started, job
    taken, job OK); with GITOPS_RQ_LOG_LEVEL=INFO they are there, as JSON lines of the one
    handler (RQ added no handler or format of its own)."""
    monkeypatch.setattr("gitops_bot.wiring.make_redis", lambda settings: redis)
    redis = fakeredis.FakeRedis()
    env = {"GITOPS_REDIS_URL": "redis://unused", "GITOPS_PROJECTS": PROJECT}
    env |= {"GITOPS_DATABASE_URL": f"sqlite:///{tmp_path / 'bot.sqlite3'}"}
    if rq_level:
        env["GITOPS_RQ_LOG_LEVEL"] = rq_level
    settings = Settings.from_env(env)
    RQWorkQueue(redis).enqueue(f"{__name__}.plain_job", job_id="plain")
    with captured(monkeypatch, settings=LogSettings(format="json", rq_level="WARNING")) as lines:
        logs.configure("worker", settings.logs, lines.stream, force=True)
        assert runner.worker(settings, burst=True)
        rq_lines = [line for line in lines.json() if line["logger"].startswith("rq")]
        assert logging.getLogger("rq.worker").handlers == []
    assert any(line["event"] == "second job" for line in lines.json())
    if rq_level is None:
        assert rq_lines == []
    else:
        assert {line["logger"] for line in rq_lines} >= {"rq.worker"}
        assert any("Job OK" in line["event"] for line in rq_lines)
        assert {line["role"] for line in rq_lines} == {"worker"}
