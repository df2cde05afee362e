"""Two workers running the same note's command at once: it still runs once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.app.commands import once as command_once
from bot.app.commands import verbs as run
from bot.app.commands.verbs import CommandVerdict, Invocation, MrRef
from bot.core.commands import Verb
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.models import AUDIT, OPERATIONS
from bot.store.submit import NewRequest
from tests.builders import make_operation

MR = MrRef(project_id=42, project_path="platform/config", iid=7)


def together(
    monkeypatch: pytest.MonkeyPatch, task: Callable[[], CommandVerdict]
) -> list[CommandVerdict]:
    """Runs `task` in two threads, in the worst order: the second one looks for an earlier run
    of the note before the first one commits, and acts only after that commit (unless the first
    one makes it wait, as it must)."""
    real = command_once._previous
    first_looked, second_looked, first_done = (
        threading.Event(),
        threading.Event(),
        threading.Event(),
    )

    def previous(*args: Any) -> CommandVerdict | None:
        found = real(*args)
        if threading.current_thread().name == "first":
            first_looked.set()
            second_looked.wait(timeout=1.0)  # never comes while the second run is held back
        else:
            second_looked.set()
            first_done.wait(timeout=10.0)
        return found

    monkeypatch.setattr(command_once, "_previous", previous)
    results: list[CommandVerdict] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(task())
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            if threading.current_thread().name == "first":
                first_done.set()

    first = threading.Thread(target=worker, name="first")
    second = threading.Thread(target=worker, name="second")
    first.start()
    assert first_looked.wait(timeout=10.0)
    second.start()
    for thread in (first, second):
        thread.join(timeout=30)
    assert errors == []
    return results


def correlated(db: Engine, correlation_id: str) -> list[str]:
    """Events of the audit rows written for a correlation id."""
    with db.connect() as conn:
        return list(
            conn.execute(
                select(AUDIT.c.event).where(AUDIT.c.correlation_id == correlation_id)
            ).scalars()
        )


def test_one_apply_note_run_by_two_workers_at_once_applies_once(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers run one `/gitops apply` note at once: one request, one audit row."""
    inv = Invocation(Verb.APPLY, "alice", 9000)
    request = NewRequest(
        subject_id=MR.subject_id,
        target_key=MR.target_key("main"),
        project=MR.project_path,
        target_branch="main",
        title="Scale",
        flow=Flow.MR_FIRST,
        requested_by="alice",
        mr_iid=MR.iid,
    )
    results = together(monkeypatch, lambda: run.apply(db, MR, inv, request))
    assert sorted(r.duplicate for r in results) == [False, True]
    assert all(r.accepted for r in results)
    with db.connect() as conn:
        assert len(conn.execute(select(OPERATIONS.c.id)).all()) == 1
    assert correlated(db, inv.correlation_id) == ["submit"]


def test_one_retry_note_run_by_two_workers_at_once_retries_once(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers run one `/gitops retry` note at once: RETRY fires once (it is legal twice in
    a row, so only holding the second run back until the first commits prevents a second)."""
    op_id = make_operation(db, S.HANDLE_FAILED, flow=Flow.MR_FIRST)
    inv = Invocation(Verb.RETRY, "maria", 9100)
    results = together(monkeypatch, lambda: run.retry(db, MR, inv))
    assert sorted(r.duplicate for r in results) == [False, True]
    assert [r.operation_id for r in results] == [op_id, op_id]
    assert correlated(db, inv.correlation_id) == ["retry"]
