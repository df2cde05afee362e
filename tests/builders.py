"""Plain builders for tests: a request, and an operation driven into any state by the table."""

from __future__ import annotations

import itertools
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.fire import fire
from bot.store.models import AUDIT, BINDINGS, OPERATIONS, OUTBOX
from bot.store.submit import NewRequest, submit

_counter = itertools.count(1)


def make_request(**kw: Any) -> NewRequest:
    """A valid API request; every field can be overridden."""
    n = next(_counter)
    values: dict[str, Any] = {
        "subject_id": f"service-{n}",
        "target_key": "config/prod.yaml",
        "project": "platform/config",
        "target_branch": "main",
        "title": f"Change {n}",
        "flow": Flow.APPROVE_FIRST,
        "requested_by": "alice",
        "files": [{"path": "config/prod.yaml", "content": "replicas: 3\n"}],
    }
    values.update(kw)
    return NewRequest(**values)


#: Events (with the field changes their real callers make) that lead from a new request to each
#: state, per flow.
_MR = {
    "mr_iid": 7,
    "mr_url": "https://gitlab.example.com/platform/config/-/merge_requests/7",
    "mr_opened_by_bot": True,
}
PATHS: dict[Flow, list[tuple[E, dict[str, Any]]]] = {
    Flow.APPROVE_FIRST: [
        (E.APPROVAL_SUBMITTED, {"approval_id": "apr-1"}),
        (E.APPROVED, {}),
        (E.MR_OPENED, _MR),
        (E.PIPELINE_PASSED, {}),
        (E.HANDLE_START, {}),
        (E.APPROVALS_GIVEN, {}),
        (E.MERGED, {"merge_commit_sha": "f" * 40}),
        (E.DEPLOYED, {}),
    ],
    Flow.MR_FIRST: [
        (E.MR_OPENED, _MR),
        (E.PIPELINE_PASSED, {}),
        (E.REQUEST_APPROVAL, {}),
        (E.APPROVAL_SUBMITTED, {"approval_id": "apr-1"}),
        (E.APPROVED, {}),
        (E.APPROVALS_GIVEN, {}),
        (E.MERGED, {"merge_commit_sha": "f" * 40}),
        (E.DEPLOYED, {}),
    ],
}

#: How to reach each failure/closing state from somewhere on the happy path.
_DETOURS: dict[S, tuple[S, E]] = {
    S.CREATE_FAILED: (S.MR_CREATING, E.CREATE_ERROR),
    S.HANDLE_FAILED: (S.MERGING, E.MERGE_ERROR),
    S.REJECTED: (S.APPROVAL_SENT, E.REJECTED),
    S.CLOSED: (S.MERGING, E.CANCEL),
}


def make_operation(
    engine: Engine,
    state: S = S.APPROVAL_SENDING,
    flow: Flow = Flow.APPROVE_FIRST,
    *,
    mr_iid: int = 7,
    **kw: Any,
) -> str:
    """Submits a request and fires the table's events until the binding is in `state` (its MR,
    once opened, is `mr_iid`)."""
    op_id = submit(engine, make_request(flow=flow, **kw)).operation_id
    detour = _DETOURS.get(state)
    goal = detour[0] if detour else state
    current = binding_state(engine, op_id)
    for event, changes in PATHS[flow]:
        if current == goal:
            break
        if event is E.MR_OPENED and mr_iid != _MR["mr_iid"]:
            url = f"https://gitlab.example.com/platform/config/-/merge_requests/{mr_iid}"
            changes = {**changes, "mr_iid": mr_iid, "mr_url": url}
        current = fire(engine, TransitionRequest(op_id, event, changes=changes)).new_state
    assert current == goal, f"could not reach {goal} in {flow}"
    if detour:
        fire(engine, TransitionRequest(op_id, detour[1]))
    assert binding_state(engine, op_id) == state
    return op_id


def merge_line(engine: Engine, size: int, first_mr: int = 101, **kw: Any) -> list[str]:
    """`size` changes merging into one branch (make_operation's, or `target_branch`), in the
    order they entered its merge queue; each has its own MR (!101, !102, ...)."""
    return [
        make_operation(engine, S.MERGING, mr_iid=iid, **kw)
        for iid in range(first_mr, first_mr + size)
    ]


def binding_state(engine: Engine, operation_id: str) -> S:
    """The state of the binding this operation belongs to."""
    with engine.connect() as conn:
        value = conn.execute(
            select(BINDINGS.c.state)
            .join(OPERATIONS, OPERATIONS.c.binding_id == BINDINGS.c.id)
            .where(OPERATIONS.c.id == operation_id)
        ).scalar_one()
    return S(value)


def operation(engine: Engine, operation_id: str) -> dict[str, Any]:
    """The operation row as a dict."""
    with engine.connect() as conn:
        row = conn.execute(select(OPERATIONS).where(OPERATIONS.c.id == operation_id)).one()
    return dict(row._mapping)


def count(engine: Engine, table: Any, operation_id: str | None = None) -> int:
    """Rows in the audit log or outbox (for one operation, when given)."""
    query = select(func.count()).select_from(table)
    if operation_id is not None:
        query = query.where(table.c.operation_id == operation_id)
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


__all__ = [
    "AUDIT",
    "OUTBOX",
    "PATHS",
    "binding_state",
    "count",
    "make_operation",
    "make_request",
    "merge_line",
]
