"""Starting a request: a first submission, a re-apply (reset in place) or a revert."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from bot.core.events import Event, Source
from bot.core.identity import identity_from_request
from bot.core.resolve import resolve
from bot.core.states import IN_FLIGHT, BindingState, Flow
from bot.core.table import Transition
from bot.errors import Conflict, IllegalTransition, InProgress
from bot.store.fire import (
    TransitionMade,
    new_operation_id,
    record_outcome,
    snapshot_of,
    write_audit_and_outbox,
)
from bot.store.fire_sql import Write
from bot.store.models import BINDINGS, OPERATIONS, utcnow
from bot.store.writeguard import state_writes

_ops = OPERATIONS
_bindings = BINDINGS


@dataclass(frozen=True)
class NewRequest:
    """What a requester asks for; becomes one operation row."""

    subject_id: str
    target_key: str
    project: str
    target_branch: str
    title: str
    flow: Flow
    requested_by: str
    description: str = ""
    files: list[dict[str, Any]] = field(default_factory=list)
    idempotency_key: str | None = None
    request_hash: str | None = None
    #: for `/gitops apply` on an existing MR: its iid (the MR is the person's, not the bot's)
    mr_iid: int | None = None
    mr_url: str | None = None
    reverts_operation_id: str | None = None
    #: the repository policy the change follows: the commit it was read at, what it set
    policy_sha: str | None = None
    policy: dict[str, Any] | None = None
    #: requested by a Maintainer: the policy's protected paths may change
    maintainer_request: bool = False
    #: where the API submitter is told of each phase change (checked against
    #: GITOPS_CALLBACK_HOSTS before it gets here)
    callback_url: str | None = None
    #: the API client that submitted it (bot/store/clients.py; None: not through the API)
    api_client: str | None = None


def submit(
    engine: Engine,
    request: NewRequest,
    *,
    source: Source = Source.API,
    actor: str | None = None,
    correlation_id: str | None = None,
    operation_id: str | None = None,
    now: datetime | None = None,
) -> TransitionMade:
    """Creates the operation and takes its binding, in one transaction, through the table."""
    started = time.perf_counter()
    event = Event.REVERT if request.reverts_operation_id else Event.SUBMIT
    try:
        with engine.begin() as conn:
            result = submit_in(
                conn,
                request,
                event=event,
                source=source,
                actor=actor,
                correlation_id=correlation_id,
                operation_id=operation_id,
                now=now,
            )
    except IntegrityError as exc:
        # two first submissions for the same subject and target raced on the unique key
        record_outcome(event, "conflict", started)
        raise Conflict(f"{request.subject_id} -> {request.target_key} was taken meanwhile") from exc
    except (IllegalTransition, InProgress):
        record_outcome(event, "illegal", started)
        raise
    except Conflict:
        record_outcome(event, "conflict", started)
        raise
    record_outcome(event, "success", started)
    return result


def submit_in(
    conn: Connection,
    request: NewRequest,
    *,
    event: Event,
    source: Source,
    actor: str | None,
    correlation_id: str | None,
    operation_id: str | None,
    now: datetime | None,
) -> TransitionMade:
    """submit() inside the caller's transaction."""
    now = now or utcnow()
    op_id = operation_id or new_operation_id()
    binding = conn.execute(
        select(_bindings, _ops.c.step.label("owner_step"))
        .join(_ops, _ops.c.id == _bindings.c.operation_id, isouter=True)
        .where(
            _bindings.c.subject_id == request.subject_id,
            _bindings.c.target_key == request.target_key,
        )
    ).one_or_none()
    state = BindingState(binding.state) if binding is not None else None
    op_values: Mapping[str, Any] = {
        "mr_iid": request.mr_iid,
        "prior_step": binding.owner_step if binding is not None else None,
    }
    resolution = resolve(state, event, snapshot_of(op_values, request.flow))
    transition = resolution.transition
    if transition is None:
        if state in IN_FLIGHT or state in {BindingState.CREATE_FAILED, BindingState.HANDLE_FAILED}:
            assert binding is not None
            raise InProgress(binding.operation_id)
        raise IllegalTransition(f"{event} is not allowed in {state}")
    with state_writes(conn):
        binding_id = _claim_binding(conn, request, binding, op_id, transition.target, now)
        row = _operation_row(request, op_id, binding_id, transition, now)
        conn.execute(insert(_ops).values(row))
    after = snapshot_of(op_values, request.flow)
    write_audit_and_outbox(
        conn,
        Write(
            operation_id=op_id,
            binding_id=binding_id,
            binding_version=binding.version if binding is not None else 0,
            version=0,
            from_state=state.value if state is not None else None,
            to_state=transition.target.value,
            event=event.value,
            step=transition.step.value,
            changes={},
            effects=[e.value for e in transition.effects_for(after)],
            source=source.value,
            actor=actor,
            correlation_id=correlation_id,
            detail=None,
            now=now,
        ),
        1,
    )
    return TransitionMade(op_id, event, state, transition.target, transition.step, 1)


def _claim_binding(
    conn: Connection,
    request: NewRequest,
    binding: Any,
    op_id: str,
    target: BindingState,
    now: datetime,
) -> int:
    """The (subject, target) binding now owned by `op_id` in `target`: created, or taken over by
    compare-and-set on its version (Conflict when it moved under us); its id."""
    if binding is None:
        return int(
            conn.execute(
                insert(_bindings)
                .values(
                    subject_id=request.subject_id,
                    target_key=request.target_key,
                    operation_id=op_id,
                    state=target.value,
                    version=1,
                    updated_at=now,
                    state_since=now,
                )
                .returning(_bindings.c.id)
            ).scalar_one()
        )
    moved = conn.execute(
        update(_bindings)
        .where(_bindings.c.id == binding.id, _bindings.c.version == binding.version)
        .values(
            operation_id=op_id,
            state=target.value,
            version=binding.version + 1,
            updated_at=now,
            state_since=now,
        )
    )
    if moved.rowcount != 1:
        raise Conflict(f"{request.subject_id} -> {request.target_key} moved under us")
    return int(binding.id)


def _operation_row(
    request: NewRequest, op_id: str, binding_id: int, transition: Transition, now: datetime
) -> dict[str, Any]:
    """The new operation's row, at version 1 in the transition's step."""
    return {
        "id": op_id,
        "binding_id": binding_id,
        "subject_id": request.subject_id,
        "target_key": request.target_key,
        "flow": request.flow.value,
        "step": transition.step.value,
        "version": 1,
        "kind": "revert" if request.reverts_operation_id else "change",
        "reverts_operation_id": request.reverts_operation_id,
        "project": request.project,
        "target_branch": request.target_branch,
        "title": request.title,
        "description": request.description,
        "files": request.files,
        "change_identity": _identity(request),
        "requested_by": request.requested_by,
        "idempotency_key": request.idempotency_key,
        "request_hash": request.request_hash,
        "callback_url": request.callback_url,
        "api_client": request.api_client,
        "mr_iid": request.mr_iid,
        "mr_url": request.mr_url,
        "mr_opened_by_bot": False,
        "policy_sha": request.policy_sha,
        "policy": request.policy,
        "maintainer_request": request.maintainer_request or None,
        "attempts": 0,
        "created_at": now,
        "updated_at": now,
    }


def _identity(request: NewRequest) -> dict[str, Any] | None:
    """What an approval of this request approves, when its files say (API, revert); a person's
    MR (`/gitops apply`) gets its identity from the MR before approval is requested."""
    if not request.files:
        return None
    return identity_from_request(request.project, request.target_branch, request.files).to_json()
