"""fire(): the only writer of state: table, guards, CAS, audit and outbox in one transaction."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from bot import metrics
from bot.core.callbacks import delivery_id
from bot.core.events import Event
from bot.core.guards import Snapshot
from bot.core.request import TransitionRequest
from bot.core.resolve import resolve
from bot.core.states import BindingState, Flow, Step
from bot.core.table import Effect
from bot.errors import Conflict, IllegalTransition, NotOwner, UnknownOperation
from bot.store import fire_sql, queue
from bot.store.models import AUDIT, BINDINGS, OPERATIONS, OUTBOX, utcnow
from bot.store.writeguard import state_writes

log = logging.getLogger(__name__)

_ops = OPERATIONS
_bindings = BINDINGS

#: Operation columns a transition may set along with its step (remote references, deadline...).
WRITABLE: frozenset[str] = frozenset(
    c.name
    for c in _ops.columns
    if c.name
    not in {
        "id",
        "binding_id",
        "subject_id",
        "target_key",
        "flow",
        "step",
        "version",
        "created_at",
        "updated_at",
        "callback_url",  # the submitter's, set once at submit
    }
)


#: What fire() reads: the guard's inputs, the versions to compare-and-set, the owner.
_READ = (
    select(
        _ops.c.binding_id,
        _ops.c.subject_id,
        _ops.c.target_key,
        _ops.c.flow,
        _ops.c.step,
        _ops.c.version,
        _ops.c.mr_iid,
        _ops.c.mr_opened_by_bot,
        _ops.c.approved_at,
        _ops.c.approval_id,
        _bindings.c.state,
        _bindings.c.operation_id.label("owner"),
        _bindings.c.version.label("binding_version"),
        _bindings.c.state_since,
    )
    .join(_bindings, _bindings.c.id == _ops.c.binding_id)
    .where(_ops.c.id == bindparam("op"))
)


#: Operation columns guards read; like state, they change only through fire() (the database
#: refuses them elsewhere: migration 0006, bot/store/writeguard.py).
GUARD_COLUMNS = ("step", "mr_iid", "mr_opened_by_bot", "approved_at", "approval_id")


@dataclass(frozen=True, slots=True)
class CurrentState:
    """An operation as last read, or as fire() left it: enough to fire again without a read.

    Safe to hold: fire() compare-and-sets both versions, so a stale CurrentState is a Conflict.
    """

    operation_id: str
    binding_id: int
    binding_version: int
    version: int
    state: BindingState
    flow: Flow
    guard_values: Mapping[str, Any]
    #: when the binding entered `state` (None: not known, from before migration 0005)
    state_since: datetime | None = None

    def snapshot(self, changes: Mapping[str, Any] | None = None) -> Snapshot:
        """The guards' view, with pending changes applied."""
        return snapshot_of({**self.guard_values, **(changes or {})}, self.flow)


@dataclass(frozen=True, slots=True)
class TransitionMade:
    """What a successful fire() did, and the operation as it left it."""

    operation_id: str
    event: Event
    old_state: BindingState | None
    new_state: BindingState
    step: Step
    version: int
    current: CurrentState | None = None


def load_current(conn: Connection, operation_id: str) -> CurrentState:
    """Reads what fire() needs; refuses an unknown id and an operation that lost its binding."""
    row = conn.execute(_READ, {"op": operation_id}).one_or_none()
    if row is None:
        raise UnknownOperation(operation_id)
    values = row._mapping
    if values["owner"] != operation_id:
        raise NotOwner(
            f"{operation_id} no longer owns {values['subject_id']} -> "
            f"{values['target_key']} ({values['owner']} does)"
        )
    return CurrentState(
        operation_id=operation_id,
        binding_id=values["binding_id"],
        binding_version=values["binding_version"],
        version=values["version"],
        state=BindingState(values["state"]),
        flow=Flow(values["flow"]),
        guard_values={k: values[k] for k in GUARD_COLUMNS},
        state_since=values["state_since"],
    )


def snapshot_of(values: Mapping[str, Any], flow: Flow) -> Snapshot:
    """The guard's view of an operation from its column values."""
    step = values.get("step")
    prior = values.get("prior_step")
    return Snapshot(
        flow=flow,
        step=Step(step) if step is not None else None,
        has_mr=values.get("mr_iid") is not None,
        mr_opened_by_bot=bool(values.get("mr_opened_by_bot")),
        approved=values.get("approved_at") is not None,
        has_approval_request=values.get("approval_id") is not None,
        prior_step=Step(prior) if prior is not None else None,
    )


def _check_changes(changes: Mapping[str, Any] | None) -> dict[str, Any]:
    unknown = set(changes or {}) - WRITABLE
    if unknown:
        raise ValueError(f"fire() cannot set {sorted(unknown)}")
    return dict(changes or {})


def record_outcome(event: Event, outcome: str, started: float) -> None:
    metrics.FIRE_TOTAL.labels(event.value, outcome).inc()
    metrics.FIRE_SECONDS.labels(event.value).observe(time.perf_counter() - started)


def fire(
    engine: Engine, request: TransitionRequest, *, current: CurrentState | None = None
) -> TransitionMade:
    """Moves an operation by one table transition, in its own transaction.

    `current` (from load_current() or a previous TransitionMade) saves the read round trip. It is
    not part of the request: a request can be fired again (with_conflict_retry), a held
    CurrentState cannot once it lost a race.
    """
    event = request.event
    started = time.perf_counter()
    try:
        with engine.begin() as conn:
            result = fire_in(conn, request, current=current)
    except IllegalTransition:
        record_outcome(event, "illegal", started)
        raise
    except Conflict:
        record_outcome(event, "conflict", started)
        raise
    except NotOwner:
        record_outcome(event, "stale", started)
        raise
    except Exception:
        record_outcome(event, "failure", started)
        raise
    record_outcome(event, "success", started)
    return result


def fire_in(
    conn: Connection, request: TransitionRequest, *, current: CurrentState | None = None
) -> TransitionMade:
    """fire() inside the caller's transaction (nothing is committed here)."""
    operation_id, event = request.operation_id, request.event
    now = request.now or utcnow()
    changes = _check_changes(request.changes)
    if current is None:
        current = load_current(conn, operation_id)
    elif current.operation_id != operation_id:
        raise ValueError(f"current is for {current.operation_id}, not {operation_id}")
    state = current.state
    snapshot = current.snapshot(changes)
    resolution = resolve(state, event, snapshot)
    transition = resolution.transition
    if transition is None:
        for reason in resolution.refused:
            log.info("guard refused", extra={"operation_id": operation_id, "reason": reason})
        raise IllegalTransition(
            f"{event} is not allowed in {state} for {operation_id}"
            + (f" ({'; '.join(resolution.refused)})" if resolution.refused else "")
        )
    version = current.version
    expected_version = request.expected_version
    if expected_version is not None and expected_version != version:
        raise Conflict(f"{operation_id} is at version {version}, not {expected_version}")
    if transition.stamp:
        changes[transition.stamp] = now
    after = replace(snapshot, approved=snapshot.approved or transition.stamp == "approved_at")
    effects = [e.value for e in transition.effects_for(after)]
    write = write_path(conn.dialect.name)
    new_version = write(
        conn,
        fire_sql.Write(
            operation_id=operation_id,
            binding_id=current.binding_id,
            binding_version=current.binding_version,
            version=version,
            from_state=state.value,
            to_state=transition.target.value,
            event=event.value,
            step=transition.step.value,
            changes=changes,
            effects=effects,
            source=request.source.value,
            actor=request.actor,
            correlation_id=request.correlation_id,
            detail=request.detail,
            now=now,
        ),
    )
    if new_version is None:
        raise Conflict(f"{operation_id} moved under us (version {version} is gone)")
    _follow_queue(conn, operation_id, state, transition.target, now)
    left = transition.target is not state
    if left and current.state_since is not None:
        # observed before the caller commits: fire() commits at once; a fire_in() caller's
        # rollback after this is rare (a validation body that raises) and only skews the metric
        metrics.STATE_SECONDS.labels(state.value).observe(
            max((now - current.state_since).total_seconds(), 0.0)
        )
    after_current = replace(
        current,
        binding_version=current.binding_version + 1,
        version=new_version,
        state=transition.target,
        state_since=now if left else current.state_since,
        guard_values={
            **current.guard_values,
            **{k: v for k, v in changes.items() if k in GUARD_COLUMNS},
            "step": transition.step.value,
        },
    )
    return TransitionMade(
        operation_id, event, state, transition.target, transition.step, new_version, after_current
    )


def _follow_queue(
    conn: Connection, operation_id: str, old: BindingState, new: BindingState, now: datetime
) -> None:
    """Into MERGING: the back of the branch's merge queue; out of it: out of the queue."""
    if new is BindingState.MERGING and old is not BindingState.MERGING:
        queue.enter(conn, operation_id, now)
    elif old is BindingState.MERGING and new is not BindingState.MERGING:
        queue.leave(conn, operation_id)


#: A write path: one transition's CAS, audit and outbox rows; the new version, or None if raced.
WritePath = Callable[[Connection, fire_sql.Write], int | None]


def write_path(dialect: str) -> WritePath:
    """The one place fire() picks how a transition is written, by the connection's dialect.

    Two paths write the same rows (binding CAS, operation CAS, one audit row, the outbox rows):

    - PostgreSQL: `fire_sql.write_postgres`, one statement of data-modifying CTEs: both
      compare-and-sets, the audit row and the outbox rows in one round trip instead of four
      (plus the read, which a caller holding a CurrentState skips). This is the production path
      and fire()'s hot path (see BENCHMARKS.md).
    - anything else: `_write_generic`, the same writes as separate Core statements. SQLite (the
      embedded default and the test suite's database) has no data-modifying CTEs (a WITH
      clause there may only hold SELECTs), so it needs this one.

    Both run inside the caller's transaction, so a lost race on either writes nothing. Each
    opens the database's state door (bot/store/writeguard.py) itself: the generic path with
    state_writes(), the CTE in its own statement, for the rest of the transaction.
    tests/db/test_fire.py::test_the_cte_and_the_generic_write_leave_the_same_rows (PostgreSQL
    only) fires the same transitions through both and compares the rows they leave.
    """
    return fire_sql.write_postgres if dialect == "postgresql" else _write_generic


def _write_generic(conn: Connection, w: fire_sql.Write) -> int | None:
    """Binding CAS, operation CAS, audit row and outbox rows as separate statements."""
    with state_writes(conn):
        moved = conn.execute(
            update(_bindings)
            .where(
                _bindings.c.id == w.binding_id,
                _bindings.c.version == w.binding_version,
                _bindings.c.operation_id == w.operation_id,
            )
            .values(
                state=w.to_state,
                version=w.binding_version + 1,
                updated_at=w.now,
                **({"state_since": w.now} if w.to_state != w.from_state else {}),
            )
        )
        if moved.rowcount != 1:
            return None
        moved = conn.execute(
            update(_ops)
            .where(_ops.c.id == w.operation_id, _ops.c.version == w.version)
            .values(step=w.step, version=w.version + 1, updated_at=w.now, **w.changes)
        )
        if moved.rowcount != 1:
            # the binding update above is rolled back with the caller's transaction
            return None
        write_audit_and_outbox(conn, w, w.version + 1)
        return w.version + 1


def write_audit_and_outbox(conn: Connection, w: fire_sql.Write, version: int) -> None:
    conn.execute(
        insert(AUDIT).values(
            operation_id=w.operation_id,
            from_state=w.from_state,
            to_state=w.to_state,
            event=w.event,
            step=w.step,
            version=version,
            source=w.source,
            actor=w.actor,
            correlation_id=w.correlation_id,
            detail=w.detail,
            created_at=w.now,
        )
    )
    if w.effects:
        conn.execute(
            insert(OUTBOX),
            [
                {
                    "operation_id": w.operation_id,
                    "effect": effect,
                    "attempts": 0,
                    "next_attempt_at": w.now,
                    "created_at": w.now,
                }
                for effect in w.effects
            ],
        )
    if w.phase_changed:
        _write_callback(conn, w)


def _write_callback(conn: Connection, w: fire_sql.Write) -> None:
    """The phase change's callback row, when the operation has a callback_url: at most one per
    operation and phase (a second entry into a phase, or the same write twice, adds none)."""
    wanted = select(_ops.c.callback_url).where(_ops.c.id == w.operation_id)
    if conn.execute(wanted).scalar_one_or_none() is None:
        return
    dialect_insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    conn.execute(
        dialect_insert(OUTBOX)
        .values(
            operation_id=w.operation_id,
            effect=Effect.CALLBACK.value,
            payload=w.callback_payload(),
            attempts=0,
            next_attempt_at=w.now,
            created_at=w.now,
            dedupe_key=delivery_id(w.operation_id, w.to_state),
        )
        .on_conflict_do_nothing()
    )


T = TypeVar("T")


def with_conflict_retry(attempt: Callable[[], T], attempts: int = 3) -> T:
    """Runs `attempt` again (re-reading) when it loses a CAS race, up to `attempts` times."""
    for left in range(attempts - 1, -1, -1):
        try:
            return attempt()
        except Conflict:
            if left == 0:
                raise
    raise AssertionError("unreachable")


def new_operation_id() -> str:
    """A fresh operation id."""
    return str(uuid.uuid4())
