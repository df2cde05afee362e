"""Settings come from the environment once, default to the embedded mode and hide secrets."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest
import responses

from bot.config import Settings
from bot.gitlab import approver_accounts, author_account
from gitops_bot.embedded import EmbeddedRuntime
from jobs.schedule import register


def test_no_database_or_redis_means_the_embedded_default() -> None:
    """With nothing set the bot runs on SQLite in the working directory and the in-process queue."""
    settings = Settings.from_env({})
    assert settings.embedded
    assert settings.redis_url is None
    assert settings.database_url == f"sqlite:///{Path('gitops-bot.sqlite3').resolve()}"
    assert (settings.port, settings.sweep_interval, settings.step_timeout) == (8000, 20, 600)
    assert (settings.gitlab_timeout, settings.outbox_interval) == (10.0, 5)


def test_environment_values_are_read_and_normalised() -> None:
    """A bare postgres URL gets psycopg 3; lists are split on commas; timings are integers."""
    settings = Settings.from_env(
        {
            "GITOPS_DATABASE_URL": "postgres://u@db/gitops",
            "GITOPS_REDIS_URL": "redis://r:6379/0",
            "GITOPS_APPROVER_TOKENS": "a, b,,c",
            "GITOPS_ALLOWED_PATHS": "config/,envs/",
            "GITOPS_GITLAB_URL": "https://gitlab.example.com/",
            "GITOPS_PIPELINE_TIMEOUT": "120",
            "PORT": "9000",
        }
    )
    assert settings.database_url == "postgresql+psycopg://u@db/gitops"
    assert not settings.embedded
    assert settings.approver_tokens == ("a", "b", "c")
    assert settings.allowed_paths == ("config/", "envs/")
    assert settings.gitlab_url == "https://gitlab.example.com"
    assert (settings.pipeline_timeout, settings.port) == (120, 9000)


def test_deploy_timeout_defaults_to_an_hour_and_is_read() -> None:
    """GITOPS_DEPLOY_TIMEOUT: 3600 unless set; a positive whole number of seconds."""
    assert Settings.from_env({}).deploy_timeout == 3600
    assert Settings.from_env({"GITOPS_DEPLOY_TIMEOUT": "900"}).deploy_timeout == 900
    with pytest.raises(ValueError, match="GITOPS_DEPLOY_TIMEOUT must be a positive"):
        Settings.from_env({"GITOPS_DEPLOY_TIMEOUT": "0"})


def test_a_bad_number_is_a_clear_error() -> None:
    """A timing that is not a number names the variable instead of failing somewhere later."""
    with pytest.raises(ValueError, match="GITOPS_SWEEP_INTERVAL must be an integer"):
        Settings.from_env({"GITOPS_SWEEP_INTERVAL": "soon"})


def test_the_worker_metrics_port_is_off_unless_a_port_is_given() -> None:
    """Unset or empty: no metrics server; a port is read; anything else is a clear error."""
    assert Settings.from_env({}).worker_metrics_port is None
    assert Settings.from_env({"GITOPS_WORKER_METRICS_PORT": " "}).worker_metrics_port is None
    assert Settings.from_env({"GITOPS_WORKER_METRICS_PORT": "9101"}).worker_metrics_port == 9101
    for wrong in ("abc", "0", "70000", "-1"):
        with pytest.raises(ValueError, match="GITOPS_WORKER_METRICS_PORT must be a TCP port"):
            Settings.from_env({"GITOPS_WORKER_METRICS_PORT": wrong})


def test_secrets_never_appear_in_repr() -> None:
    """Logging the settings cannot leak a token or a secret."""
    secrets = {
        "GITOPS_GITLAB_TOKEN": "glpat-author-secret",
        "GITOPS_APPROVER_TOKENS": "glpat-approver-secret",
        "GITOPS_WEBHOOK_SECRET": "hook-secret-value",
        "GITOPS_APPROVAL_SECRET": "approval-secret-value",
        "GITOPS_DEPLOY_SECRET": "deploy-secret-value",
        "GITOPS_API_TOKEN": "api-token-value",
    }
    text = repr(Settings.from_env(secrets))
    assert not [value for value in secrets.values() if value in text]


def test_gitlab_timeout_and_outbox_interval_are_read() -> None:
    """GITOPS_GITLAB_TIMEOUT takes fractions of a second; GITOPS_OUTBOX_INTERVAL whole seconds."""
    settings = Settings.from_env({"GITOPS_GITLAB_TIMEOUT": "2.5", "GITOPS_OUTBOX_INTERVAL": "1"})
    assert (settings.gitlab_timeout, settings.outbox_interval) == (2.5, 1)


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        ("GITOPS_GITLAB_TIMEOUT", "soon", "GITOPS_GITLAB_TIMEOUT must be a positive number"),
        ("GITOPS_GITLAB_TIMEOUT", "0", "GITOPS_GITLAB_TIMEOUT must be a positive number"),
        ("GITOPS_GITLAB_TIMEOUT", "-3", "GITOPS_GITLAB_TIMEOUT must be a positive number"),
        ("GITOPS_GITLAB_TIMEOUT", "nan", "GITOPS_GITLAB_TIMEOUT must be a positive number"),
        ("GITOPS_GITLAB_TIMEOUT", "inf", "GITOPS_GITLAB_TIMEOUT must be a positive number"),
        ("GITOPS_OUTBOX_INTERVAL", "soon", "GITOPS_OUTBOX_INTERVAL must be an integer"),
        ("GITOPS_OUTBOX_INTERVAL", "2.5", "GITOPS_OUTBOX_INTERVAL must be an integer"),
        ("GITOPS_OUTBOX_INTERVAL", "0", "GITOPS_OUTBOX_INTERVAL must be a positive integer"),
        ("GITOPS_OUTBOX_INTERVAL", "-5", "GITOPS_OUTBOX_INTERVAL must be a positive integer"),
    ],
)
def test_a_bad_timeout_or_interval_is_a_clear_error(key: str, raw: str, message: str) -> None:
    """A GitLab timeout or outbox interval that is not a positive number names the variable."""
    with pytest.raises(ValueError, match=message):
        Settings.from_env({key: raw})


def test_every_gitlab_call_is_made_with_the_configured_timeout() -> None:
    """The author and approver accounts built from the settings send GITOPS_GITLAB_TIMEOUT."""
    settings = Settings.from_env(
        {
            "GITOPS_GITLAB_URL": "https://gitlab.example.com",
            "GITOPS_GITLAB_TOKEN": "author-token",
            "GITOPS_APPROVER_TOKENS": "approver-1-token,approver-2-token",
            "GITOPS_GITLAB_TIMEOUT": "2.5",
        }
    )
    accounts = [author_account(settings), *approver_accounts(settings)]
    with responses.RequestsMock() as rsps:
        rsps.get("https://gitlab.example.com/api/v4/user", json={"username": "someone"})
        for account in accounts:
            account.username()
        sent = [call.request.req_kwargs["timeout"] for call in rsps.calls]
    assert sent == [2.5, 2.5, 2.5]


class RecordingScheduler:
    """Stands in for rq-scheduler: remembers what each periodic job was registered with."""

    def __init__(self) -> None:
        self.scheduled: dict[str, dict[str, Any]] = {}

    def schedule(self, **kw: Any) -> None:
        self.scheduled[kw["id"]] = kw


class RecordingQueue:
    """Stands in for the work queue: remembers the ids of the jobs enqueued."""

    def __init__(self) -> None:
        self.enqueued: list[str | None] = []

    def enqueue(self, func: str, *args: object, job_id: str | None = None) -> None:
        self.enqueued.append(job_id)


def test_the_scheduler_dispatches_the_outbox_at_the_configured_interval() -> None:
    """`gitops-bot scheduler` registers the outbox job with GITOPS_OUTBOX_INTERVAL."""
    settings = Settings.from_env({"GITOPS_OUTBOX_INTERVAL": "2"})
    scheduler = RecordingScheduler()
    register(scheduler, settings)
    outbox = scheduler.scheduled["gitops-outbox"]
    assert (outbox["func"], outbox["interval"]) == ("jobs.outbox.dispatch", 2)


def test_the_embedded_runtime_dispatches_the_outbox_at_the_configured_interval() -> None:
    """`gitops-bot serve` enqueues the outbox job again once GITOPS_OUTBOX_INTERVAL has passed."""
    settings = Settings.from_env({"GITOPS_OUTBOX_INTERVAL": "2"})
    queue = RecordingQueue()
    services = SimpleNamespace(settings=settings, redis=fakeredis.FakeRedis(), queue=queue)
    embedded = EmbeddedRuntime(services)  # type: ignore[arg-type]
    dispatched = []
    for now in (1000.0, 1001.0, 1001.9, 1002.0, 1003.0, 1004.0):
        queue.enqueued.clear()
        embedded.tick_once(now)
        if "gitops-outbox" in queue.enqueued:
            dispatched.append(now)
    assert dispatched == [1000.0, 1002.0, 1004.0]


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        ("GITOPS_SWEEP_INTERVAL", "0", "GITOPS_SWEEP_INTERVAL must be a positive integer"),
        ("GITOPS_STEP_TIMEOUT", "-1", "GITOPS_STEP_TIMEOUT must be a positive integer"),
        ("GITOPS_PIPELINE_TIMEOUT", "0", "GITOPS_PIPELINE_TIMEOUT must be a positive integer"),
        ("GITOPS_RECONCILE_INTERVAL", "0", "GITOPS_RECONCILE_INTERVAL must be a positive"),
        ("GITOPS_RECONCILE_MAX_AGE", "-60", "GITOPS_RECONCILE_MAX_AGE must be a positive"),
        ("GITOPS_RECONCILE_MIN_AGE", "-1", "GITOPS_RECONCILE_MIN_AGE must be zero or a positive"),
        (
            "GITOPS_MAX_BODY_BYTES",
            "0",
            "GITOPS_MAX_BODY_BYTES must be a positive integer number of bytes",
        ),
        (
            "GITOPS_MAX_BODY_BYTES",
            "1MB",
            "GITOPS_MAX_BODY_BYTES must be an integer number of bytes",
        ),
    ],
)
def test_a_timing_or_limit_of_zero_or_less_stops_startup(key: str, raw: str, message: str) -> None:
    """A sweep every 0 s, a negative step timeout or a 0-byte body limit would make the bot spin
    or refuse everything: the process does not start, and says which variable is wrong."""
    with pytest.raises(ValueError, match=message):
        Settings.from_env({key: raw})


def test_a_reconcile_min_age_of_zero_is_allowed() -> None:
    """Reconciling merged changes at once is a choice, not a mistake."""
    assert Settings.from_env({"GITOPS_RECONCILE_MIN_AGE": "0"}).reconcile_min_age == 0
