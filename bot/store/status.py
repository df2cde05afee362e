"""The status view: one operation as its status comment and dashboard page show it, and the
dashboard's lists of requests.

`load_status` reads an operation (two queries: it with its binding, then its audit rows; while
it merges, its merge queue place besides);
`overview_rows` reads what the dashboard lists (two queries). Rendering is bot/render/status.py's
and webhooks/pages.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.events import Event
from bot.core.hints import Hint, hint_for
from bot.core.states import FAILED, IN_FLIGHT, TERMINAL, BindingState, Step
from bot.store.models import AUDIT, BINDINGS, OPERATIONS
from bot.store.outbox import DROP_EVENT, RETRY_EVENT
from bot.store.queue import PROMOTE_EVENT, Place, place

_STATES = frozenset(s.value for s in BindingState)
#: One transition on a request's path: (from, to, event).
Edge = tuple[BindingState | None, BindingState, str]
_EVENTS = frozenset(e.value for e in Event)


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One audit row: a transition, or a stale event that was acknowledged and ignored."""

    at: datetime
    from_state: str | None
    to_state: str
    event: str
    step: int
    source: str
    actor: str | None
    #: the operation's version after the row; 0 for a stale event, which changed nothing
    version: int
    detail: str | None

    @property
    def stale(self) -> bool:
        """An event that arrived for nobody waiting for it: shown as ignored."""
        return self.version == 0

    @property
    def unmoved(self) -> str | None:
        """What a row that moved nothing says where a transition shows from -> to: an
        operator's promotion in its merge queue, else an ignored event; None for a transition."""
        if not self.stale:
            return None
        if self.event == PROMOTE_EVENT:
            return "moved to the front of its merge queue"
        if self.event in (RETRY_EVENT, DROP_EVENT):
            return self.detail or self.event
        return "ignored (stale event)"

    @property
    def transition(self) -> bool:
        """A real transition between two known states (it belongs on the path)."""
        return (
            not self.stale
            and self.to_state in _STATES
            and (self.from_state is None or self.from_state in _STATES)
        )


@dataclass(frozen=True, slots=True)
class StatusView:
    """An operation as its status comment (and the outbox dispatcher) sees it."""

    operation_id: str
    title: str
    requested_by: str
    subject_id: str
    target_key: str
    project: str
    project_id: int | None
    #: the binding state while the operation owns its binding, else where its history ended
    phase: BindingState
    step: Step
    owns_binding: bool
    mr_iid: int | None
    mr_url: str | None
    mr_opened_by_bot: bool
    approval_id: str | None
    merge_commit_sha: str | None
    error_detail: str | None
    timeline: tuple[TimelineEntry, ...]
    #: the status comment's id once written (the dispatcher edits it without looking it up)
    status_note_id: int | None = None
    status_note_hash: str | None = None
    #: its place in its branch's merge queue while it is MERGING (and owns its binding), else None
    queue: Place | None = None
    #: the commit the repository policy was read at (None: not read) and whether the file was
    #: there (False: the environment's settings)
    policy_sha: str | None = None
    policy_file: bool = False
    #: the change's preview (bot/app/checks/preview.py), once fixed before its approval request
    preview: dict[str, Any] | None = None
    #: what GitLab said the current wait is for (a detailed_merge_status such as
    #: status_checks_must_pass), while it waits; None otherwise
    waiting_on: str | None = None

    @property
    def hint(self) -> Hint:
        """What the requester should make of the phase and step."""
        return hint_for(self.phase, self.step)

    @property
    def gitlab_project(self) -> int | str:
        """The project as GitLab is asked for it: its numeric id once known, else its path."""
        return self.project_id if self.project_id is not None else self.project

    @property
    def path(self) -> list[Edge]:
        """The transitions this request took, in order (stale events left out)."""
        return [
            (
                BindingState(e.from_state) if e.from_state is not None else None,
                BindingState(e.to_state),
                e.event if e.event in _EVENTS else "?",
            )
            for e in self.timeline
            if e.transition
        ]


_VIEW = select(
    OPERATIONS.c.id,
    OPERATIONS.c.title,
    OPERATIONS.c.requested_by,
    OPERATIONS.c.subject_id,
    OPERATIONS.c.target_key,
    OPERATIONS.c.project,
    OPERATIONS.c.project_id,
    OPERATIONS.c.step,
    OPERATIONS.c.mr_iid,
    OPERATIONS.c.mr_url,
    OPERATIONS.c.mr_opened_by_bot,
    OPERATIONS.c.approval_id,
    OPERATIONS.c.merge_commit_sha,
    OPERATIONS.c.error_detail,
    OPERATIONS.c.status_note_id,
    OPERATIONS.c.status_note_hash,
    OPERATIONS.c.policy_sha,
    OPERATIONS.c.policy,
    OPERATIONS.c.preview,
    OPERATIONS.c.progress,
    BINDINGS.c.state,
    BINDINGS.c.operation_id.label("owner"),
).join(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)

_TIMELINE = select(
    AUDIT.c.created_at,
    AUDIT.c.from_state,
    AUDIT.c.to_state,
    AUDIT.c.event,
    AUDIT.c.step,
    AUDIT.c.version,
    AUDIT.c.source,
    AUDIT.c.actor,
    AUDIT.c.detail,
).order_by(AUDIT.c.id)


def load_status(engine: Engine, operation_id: str) -> StatusView | None:
    """The operation's status view (one query for it and its binding, one for its audit rows,
    and, while it is MERGING, its place in its merge queue)."""
    with engine.connect() as conn:
        row = conn.execute(_VIEW.where(OPERATIONS.c.id == operation_id)).one_or_none()
        if row is None:
            return None
        audit = conn.execute(_TIMELINE.where(AUDIT.c.operation_id == operation_id)).all()
    timeline = tuple(
        TimelineEntry(
            at=r.created_at,
            from_state=r.from_state,
            to_state=r.to_state,
            event=r.event,
            step=r.step,
            source=r.source,
            actor=r.actor,
            version=r.version,
            detail=r.detail,
        )
        for r in audit
    )
    values = row._mapping
    owns = values["owner"] == operation_id
    state = BindingState(values["state"])
    # a third read only while it merges (after the connection above is given back: reading the
    # line may drop rows of operations replaced meanwhile)
    queued = place(engine, operation_id) if owns and state is BindingState.MERGING else None
    return StatusView(
        operation_id=operation_id,
        title=values["title"],
        requested_by=values["requested_by"],
        subject_id=values["subject_id"],
        target_key=values["target_key"],
        project=values["project"],
        project_id=values["project_id"],
        phase=state if owns else _last_state(timeline, state),
        step=Step(values["step"]),
        owns_binding=owns,
        mr_iid=values["mr_iid"],
        mr_url=values["mr_url"],
        mr_opened_by_bot=bool(values["mr_opened_by_bot"]),
        approval_id=values["approval_id"],
        merge_commit_sha=values["merge_commit_sha"],
        error_detail=values["error_detail"],
        timeline=timeline,
        status_note_id=values["status_note_id"],
        status_note_hash=values["status_note_hash"],
        queue=queued,
        policy_sha=values["policy_sha"],
        policy_file=values["policy"] is not None,
        preview=dict(values["preview"]) if values["preview"] else None,
        waiting_on=_waiting_on(values["progress"], state) if owns else None,
    )


def _waiting_on(progress: Any, state: BindingState) -> str | None:
    """What GitLab said the operation's current merge wait is for (recorded by the wait)."""
    wait = progress.get("wait") if isinstance(progress, dict) else None
    why = wait.get("why") if isinstance(wait, dict) else None
    return why if isinstance(why, str) and why and state is BindingState.MERGING else None


def _last_state(timeline: tuple[TimelineEntry, ...], fallback: BindingState) -> BindingState:
    """Where an operation that lost its binding (re-applied) ended: its last transition's state."""
    for entry in reversed(timeline):
        if entry.transition:
            return BindingState(entry.to_state)
    return fallback


# -- the dashboard --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListedRow:
    """One request that owns its binding, as the dashboard's overview reads it."""

    id: str
    title: str
    project: str
    subject_id: str
    target_key: str
    step: int
    mr_url: str | None
    created_at: datetime
    updated_at: datetime
    deadline_at: datetime | None
    state: str


_LISTED = select(
    OPERATIONS.c.id,
    OPERATIONS.c.title,
    OPERATIONS.c.project,
    OPERATIONS.c.subject_id,
    OPERATIONS.c.target_key,
    OPERATIONS.c.step,
    OPERATIONS.c.mr_url,
    OPERATIONS.c.created_at,
    OPERATIONS.c.updated_at,
    OPERATIONS.c.deadline_at,
    BINDINGS.c.state,
).join(BINDINGS, BINDINGS.c.operation_id == OPERATIONS.c.id)


def overview_rows(engine: Engine, active_limit: int, finished_limit: int) -> list[ListedRow]:
    """In-flight and failed requests (least recently moved first), then finished ones (most
    recently moved first), each list bounded, in one connection (two queries)."""
    active = _LISTED.where(BINDINGS.c.state.in_([*IN_FLIGHT, *FAILED])).order_by(
        OPERATIONS.c.updated_at, OPERATIONS.c.id
    )
    finished = _LISTED.where(BINDINGS.c.state.in_(list(TERMINAL))).order_by(
        OPERATIONS.c.updated_at.desc(), OPERATIONS.c.id
    )
    with engine.connect() as conn:
        rows = [
            *conn.execute(active.limit(active_limit)),
            *conn.execute(finished.limit(finished_limit)),
        ]
    return [ListedRow(*row) for row in rows]
