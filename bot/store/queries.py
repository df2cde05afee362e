"""Read-side queries: one operation as a requester sees it (with its history), lists by state."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine, RowMapping

from bot.core.hints import Hint, hint_for
from bot.core.states import BindingState, Step
from bot.store.clients import project_condition
from bot.store.models import AUDIT, BINDINGS, OPERATIONS

_ops = OPERATIONS
_bindings = BINDINGS
_audit = AUDIT
_STATES = frozenset(s.value for s in BindingState)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One audit row: a transition (or a stale event acknowledged and ignored)."""

    at: datetime
    from_state: str | None
    to_state: str
    event: str
    step_code: int
    source: str
    actor: str | None
    #: the operation's version after the row; 0 for a stale event, which changed nothing
    version: int = 1

    def as_json(self) -> dict[str, Any]:
        """The entry as the API shows it."""
        return {
            "at": iso_utc(self.at),
            "from": self.from_state,
            "to": self.to_state,
            "event": self.event,
            "step": step_name(self.step_code),
            "step_code": self.step_code,
            "source": self.source,
            "actor": self.actor,
        }


@dataclass(frozen=True, slots=True)
class OperationView:
    """An operation as a requester sees it: its phase, step, hint and (optionally) history."""

    operation_id: str
    subject_id: str
    target_key: str
    flow: str
    #: the binding state while the operation owns its binding, else where its history ended
    phase: BindingState
    step: Step
    mr_url: str | None
    owns_binding: bool
    created_at: datetime
    history: tuple[HistoryEntry, ...] | None = None
    #: the commit the repository policy was read at when it started (None: not read)
    policy_sha: str | None = None

    @property
    def hint(self) -> Hint:
        """What the requester should make of it."""
        return hint_for(self.phase, self.step)

    def as_json(self) -> dict[str, Any]:
        """The view as the API shows it (history only when it was read)."""
        hint = self.hint
        body: dict[str, Any] = {
            "operation_id": self.operation_id,
            "subject_id": self.subject_id,
            "target_key": self.target_key,
            "flow": self.flow,
            "phase": self.phase.value,
            "step": self.step.name,
            "step_code": self.step.value,
            "hint": {"kind": hint.kind, "text": hint.text},
            "mr_url": self.mr_url,
            "created_at": iso_utc(self.created_at),
        }
        if self.history is not None:
            body["history"] = [entry.as_json() for entry in self.history]
        return body


@dataclass(frozen=True, slots=True)
class IdempotentHit:
    """The operation an idempotency key was first used for, and the hash of that request."""

    operation_id: str
    request_hash: str | None


def iso_utc(moment: datetime) -> str:
    """ISO 8601 in UTC with a `Z`, to the millisecond."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.removesuffix("+00:00") + "Z"


def step_name(code: int) -> str:
    """The step's name for its code (the bare code for one this version does not know)."""
    try:
        return Step(code).name
    except ValueError:
        return str(code)


_VIEW = select(
    _ops.c.id,
    _ops.c.subject_id,
    _ops.c.target_key,
    _ops.c.flow,
    _ops.c.step,
    _ops.c.mr_url,
    _ops.c.created_at,
    _ops.c.policy_sha,
    _bindings.c.state,
    _bindings.c.operation_id.label("owner"),
).join(_bindings, _bindings.c.id == _ops.c.binding_id)


def operation_view(
    conn: Connection | Engine, operation_id: str, *, with_history: bool = True
) -> OperationView | None:
    """The operation's view, or None when no operation has this id."""
    if isinstance(conn, Engine):
        with conn.connect() as c:
            return operation_view(c, operation_id, with_history=with_history)
    row = conn.execute(_VIEW.where(_ops.c.id == operation_id)).one_or_none()
    if row is None:
        return None
    history = _history(conn, operation_id)
    return _view(row._mapping, history, with_history)


def list_by_state(
    conn: Connection | Engine,
    states: Collection[BindingState],
    limit: int = 100,
    *,
    projects: Collection[str] = (),
) -> list[OperationView]:
    """Operations that own their binding, in any of `states`, newest first (no history); with
    `projects`, only those in one of them (an API client's: bot/store/clients.py)."""
    if isinstance(conn, Engine):
        with conn.connect() as c:
            return list_by_state(c, states, limit, projects=projects)
    query = (
        _VIEW.where(_bindings.c.operation_id == _ops.c.id)
        .order_by(_ops.c.created_at.desc(), _ops.c.id.desc())
        .limit(limit)
    )
    if states:
        query = query.where(_bindings.c.state.in_([s.value for s in states]))
    if projects:
        query = query.where(project_condition(projects))
    return [_view(row._mapping, (), with_history=False) for row in conn.execute(query)]


def operation_by_idempotency_key(conn: Connection | Engine, key: str) -> IdempotentHit | None:
    """The operation first created with this idempotency key, if any."""
    query = select(_ops.c.id, _ops.c.request_hash).where(_ops.c.idempotency_key == key)
    if isinstance(conn, Engine):
        with conn.connect() as c:
            row = c.execute(query).one_or_none()
    else:
        row = conn.execute(query).one_or_none()
    return None if row is None else IdempotentHit(row.id, row.request_hash)


def _history(conn: Connection, operation_id: str) -> tuple[HistoryEntry, ...]:
    rows = conn.execute(
        select(
            _audit.c.created_at,
            _audit.c.from_state,
            _audit.c.to_state,
            _audit.c.event,
            _audit.c.step,
            _audit.c.version,
            _audit.c.source,
            _audit.c.actor,
        )
        .where(_audit.c.operation_id == operation_id)
        .order_by(_audit.c.id)
    ).all()
    return tuple(
        HistoryEntry(
            at=r.created_at,
            from_state=r.from_state,
            to_state=r.to_state,
            event=r.event,
            step_code=r.step,
            source=r.source,
            actor=r.actor,
            version=r.version,
        )
        for r in rows
    )


def _view(row: RowMapping, history: tuple[HistoryEntry, ...], with_history: bool) -> OperationView:
    owns = row["owner"] == row["id"]
    state = BindingState(row["state"])
    return OperationView(
        operation_id=row["id"],
        subject_id=row["subject_id"],
        target_key=row["target_key"],
        flow=str(row["flow"]),
        phase=state if owns else _final_phase(history, state),
        step=Step(row["step"]),
        mr_url=row["mr_url"],
        owns_binding=owns,
        created_at=row["created_at"],
        history=history if with_history else None,
        policy_sha=row["policy_sha"],
    )


def _final_phase(history: tuple[HistoryEntry, ...], fallback: BindingState) -> BindingState:
    """Where an operation that lost its binding (re-applied) ended: its last transition's state."""
    for entry in reversed(history):
        if entry.version > 0 and entry.to_state in _STATES:
            return BindingState(entry.to_state)
    return fallback
