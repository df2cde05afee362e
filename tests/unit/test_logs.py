"""Log lines: JSON objects (or console text on a terminal) with the common keys, the caller's
`extra` keys and the keys bound for the work in hand; the settings that choose them."""

from __future__ import annotations

import io
import json
import logging
import os
from datetime import UTC, datetime

import pytest
import structlog

from bot import logs
from bot.config import LogSettings, Settings
from tests.logcapture import Terminal, captured

log = logging.getLogger("bot.test")


def test_a_line_is_one_json_object_with_the_common_keys_extra_and_bound_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """time (ISO 8601, UTC), level, logger, event, role and pid on every line, the `extra` keys
    and what the work bound beside them, a traceback as one field."""
    with captured(monkeypatch, role="worker") as lines, logs.scope(operation_id="op-1", mr_iid=7):
        log.info("change ready: %s", "yes", extra={"branch": "gitops/op-1", "made_now": True})
        try:
            raise RuntimeError("GitLab said no")
        except RuntimeError:
            log.exception("step crashed")

    ready, crashed = lines.json()
    assert list(ready)[:6] == ["time", "level", "logger", "event", "role", "pid"]
    assert datetime.fromisoformat(ready["time"]).tzinfo == UTC
    assert ready["time"].endswith("Z")
    assert ready | {"time": None} == {
        "time": None,
        "level": "info",
        "logger": "bot.test",
        "event": "change ready: yes",
        "role": "worker",
        "pid": os.getpid(),
        "operation_id": "op-1",
        "mr_iid": 7,
        "branch": "gitops/op-1",
        "made_now": True,
    }
    assert crashed["level"] == "error"
    assert "RuntimeError: GitLab said no" in crashed["exception"]
    assert crashed["operation_id"] == "op-1"


def test_an_extra_key_wins_over_a_bound_one_and_none_is_not_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a call says about itself is what the line says; an unknown MR is no key at all."""
    with (
        captured(monkeypatch) as lines,
        logs.scope(operation_id="bound", mr_iid=None, project="platform/config"),
    ):
        log.warning("other change", extra={"operation_id": "said"})

    (line,) = lines.json()
    assert (line["operation_id"], line["project"]) == ("said", "platform/config")
    assert "mr_iid" not in line


def test_text_on_a_terminal_json_otherwise_and_the_setting_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unset GITOPS_LOG_FORMAT: console text on a terminal, JSON lines on a pipe or file;
    set, it is obeyed either way; text off a terminal has no colours and still shows the keys."""
    auto = LogSettings()
    assert logs.log_format(auto, Terminal()) == "text"
    assert logs.log_format(auto, io.StringIO()) == "json"
    assert logs.log_format(LogSettings(format="json"), Terminal()) == "json"
    assert logs.log_format(LogSettings(format="text"), io.StringIO()) == "text"

    on_pipe = LogSettings.from_env({"GITOPS_LOG_FORMAT": "text"})
    with captured(monkeypatch, role="web", settings=on_pipe) as lines, logs.scope(step="handle"):
        log.info("merged", extra={"operation_id": "op-2"})
    assert "\x1b[" not in lines.text
    assert "merged" in lines.text
    for shown in ("operation_id=op-2", "step=handle", "role=web", "[bot.test]"):
        assert shown in lines.text

    with captured(monkeypatch, settings=auto, stream=Terminal()) as lines:
        log.info("on a terminal")
    assert "on a terminal" in lines.text
    with pytest.raises(json.JSONDecodeError):
        lines.json()


def test_log_settings_are_read_from_the_environment() -> None:
    """GITOPS_LOG_FORMAT (json|text, unset: by terminal), GITOPS_LOG_LEVEL (INFO) and
    GITOPS_RQ_LOG_LEVEL (WARNING), any case; a wrong value names the variable."""
    assert LogSettings.from_env({}) == LogSettings(format=None, level="INFO", rq_level="WARNING")
    read = LogSettings.from_env(
        {"GITOPS_LOG_FORMAT": "JSON", "GITOPS_LOG_LEVEL": "debug", "GITOPS_RQ_LOG_LEVEL": "info"}
    )
    assert read == LogSettings(format="json", level="DEBUG", rq_level="INFO")
    assert Settings.from_env({"GITOPS_LOG_LEVEL": "warning"}).logs.level == "WARNING"
    with pytest.raises(ValueError, match="GITOPS_LOG_FORMAT must be one of json, text"):
        LogSettings.from_env({"GITOPS_LOG_FORMAT": "xml"})
    with pytest.raises(ValueError, match="GITOPS_RQ_LOG_LEVEL must be one of DEBUG"):
        LogSettings.from_env({"GITOPS_RQ_LOG_LEVEL": "chatty"})


def test_the_level_settings_filter_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """GITOPS_LOG_LEVEL holds back the bot's lines below it, GITOPS_RQ_LOG_LEVEL RQ's."""
    quiet = LogSettings(format="json", level="WARNING", rq_level="ERROR")
    with captured(monkeypatch, settings=quiet) as lines:
        log.info("held back")
        log.warning("shown")
        logging.getLogger("rq.queue").warning("held back too")
        logging.getLogger("rq.worker").error("rq error shown")
    assert [line["event"] for line in lines.json()] == ["shown", "rq error shown"]


def test_a_root_logger_served_by_another_handler_is_left_alone() -> None:
    """Like logging.basicConfig: with a handler already on the root (pytest's capture here)
    configure adds nothing, so a command run inside a test runner logs where the runner says."""
    before = list(logging.getLogger().handlers)
    assert before
    assert logs.configure("cli", LogSettings(format="json"), io.StringIO()) is False
    assert logging.getLogger().handlers == before


def test_configuring_again_replaces_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `cli` group configures, then the command configures with its role: one handler, the
    last role."""
    with captured(monkeypatch, role="cli") as lines:
        logs.configure("worker", LogSettings(format="json"), lines.stream, force=True)
        log.warning("once")
        ours = [h for h in logging.getLogger().handlers if h.name == logs.HANDLER_NAME]
    assert len(ours) == 1
    assert [(line["event"], line["role"]) for line in lines.json()] == [("once", "worker")]
    assert logs.configured() == "worker"


def test_gunicorns_own_lines_come_out_through_the_same_handler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gunicorn's error log (booting, workers) loses its own handler and format: its lines are
    JSON lines like the bot's."""
    from gunicorn.config import Config

    from webhooks.gunicorn_conf import StructuredLogger

    cfg = Config()
    cfg.set("errorlog", "-")
    with captured(monkeypatch, role="web") as lines:
        glog = StructuredLogger(cfg)
        glog.info("Booting worker with pid: %s", 42)
    assert glog.error_log.handlers == []
    (line,) = lines.json()
    assert (line["logger"], line["event"], line["role"]) == (
        "gunicorn.error",
        "Booting worker with pid: 42",
        "web",
    )


def test_job_scope_keeps_only_what_the_job_carried() -> None:
    """A job starts with only its carried correlation id bound and ends with nothing bound."""
    logs.bind(operation_id="left-over")
    with logs.job_scope({"correlation_id": "gitlab:abc", "other": "x"}):
        assert logs.carried() == {"correlation_id": "gitlab:abc"}
        logs.bind(operation_id="op-3")
    with logs.job_scope(None):
        assert structlog.contextvars.get_contextvars() == {}
