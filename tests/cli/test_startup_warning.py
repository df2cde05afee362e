"""The startup warning of the web, serve and worker processes when GITOPS_PROJECTS is unset."""

from __future__ import annotations

import logging
from typing import Any

import fakeredis
import pytest

from bot.config import Settings
from gitops_bot import runner

WARNING = "GITOPS_PROJECTS is not set: every project that sends a webhook or is named in a request"


@pytest.fixture
def no_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """web and serve stop before gunicorn runs or the schema is touched; the worker before RQ."""
    monkeypatch.setattr(runner, "_upgrade_schema", lambda settings: None)
    monkeypatch.setattr(runner._Gunicorn, "run", lambda self: None)
    monkeypatch.setattr("gitops_bot.wiring.make_redis", lambda settings: fakeredis.FakeRedis())
    monkeypatch.setattr("rq.SimpleWorker.work", lambda self, **kwargs: True)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNING lines the runner logged."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == runner.__name__
    ]


@pytest.mark.parametrize(
    ("start", "extra"),
    [
        (lambda s: runner.web(s, host="127.0.0.1", port=0), {}),
        (lambda s: runner.serve(s, host="127.0.0.1", port=0), {}),
        (lambda s: runner.worker(s, burst=True), {"redis_url": "redis://localhost:6379/0"}),
    ],
    ids=["web", "serve", "worker"],
)
def test_unset_projects_is_said_once_at_startup(
    no_servers: None, caplog: pytest.LogCaptureFixture, start: Any, extra: dict[str, Any]
) -> None:
    """Each process logs one WARNING naming GITOPS_PROJECTS when it is unset, none when set."""
    caplog.set_level(logging.WARNING)
    start(Settings(**extra))
    unset = warnings(caplog)
    caplog.clear()
    start(Settings(projects=("platform/config",), **extra))

    assert len(unset) == 1
    assert unset[0].startswith(WARNING)
    assert warnings(caplog) == []
