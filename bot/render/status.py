"""The MR's one status comment: what it shows, read from the database, rendered from templates/.

`load_status` reads an operation as the comment shows it (two queries); `render_status` turns
that into Markdown through `templates/status_comment.md.j2`. Every value the template prints is
escaped for Markdown and HTML (bot/render/markdown.py) unless it is `Markup` built here from
known-safe parts, so text a requester typed (title, names, error details) can never add markup,
ping anyone, hide a bidi character, or put a `/gitops` command or a GitLab quick action at the
start of a line of the bot's own note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.diagram import path_diagram
from bot.core.events import Event
from bot.core.hints import Hint, hint_for, words
from bot.core.labels import phase_title
from bot.core.states import FAILED, BindingState, Step
from bot.gitlab.notes import status_marker
from bot.render.markdown import TEMPLATES_DIR, TEXT_LIMIT, code, environment, link, md_escape
from bot.store.models import AUDIT, BINDINGS, OPERATIONS

# the escaping helpers lived here first: their importers keep importing them from here
__all__ = [
    "DETAIL_LIMIT",
    "TEMPLATE",
    "TEMPLATES_DIR",
    "TEXT_LIMIT",
    "TIMELINE_LIMIT",
    "StatusView",
    "TimelineEntry",
    "code",
    "environment",
    "link",
    "load_status",
    "md_escape",
    "render_context",
    "render_status",
    "status_context",
]

#: The status comment's template (in TEMPLATES_DIR).
TEMPLATE = "status_comment.md.j2"
#: The timeline shows this many of the latest audit rows; older ones are counted, not listed.
TIMELINE_LIMIT = 30
#: Longest error detail shown.
DETAIL_LIMIT = 500

_STATES = frozenset(s.value for s in BindingState)
#: One transition on a request's path: (from, to, event).
_Edge = tuple[BindingState | None, BindingState, str]
_EVENTS = frozenset(e.value for e in Event)
#: What may go into the marker untouched (ids, enum names, SHAs).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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

    @property
    def hint(self) -> Hint:
        """What the requester should make of the phase and step."""
        return hint_for(self.phase, self.step)

    @property
    def gitlab_project(self) -> int | str:
        """The project as GitLab is asked for it: its numeric id once known, else its path."""
        return self.project_id if self.project_id is not None else self.project

    @property
    def path(self) -> list[_Edge]:
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
    """The operation's status view (one query for it and its binding, one for its audit rows)."""
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
    )


def _last_state(timeline: tuple[TimelineEntry, ...], fallback: BindingState) -> BindingState:
    """Where an operation that lost its binding (re-applied) ended: its last transition's state."""
    for entry in reversed(timeline):
        if entry.transition:
            return BindingState(entry.to_state)
    return fallback


def _phase_words(view: StatusView) -> str:
    """The phase line after the phase's name ("waiting for the merge request's check pipeline")."""
    text = words(view.step)
    if view.phase in FAILED:
        return f"stopped while {text}"
    # "Merged: merged; waiting for ..." says it twice
    return text.removeprefix(f"{phase_title(view.phase).lower()}; ")


def _detail(view: StatusView) -> str | None:
    """The error to show: the operation's own, else what the failing transition recorded."""
    if view.error_detail:
        return view.error_detail
    if view.hint.kind != "failed":
        return None
    for entry in reversed(view.timeline):
        if entry.transition:
            return entry.detail
    return None


def _collapsed(path: list[_Edge]) -> list[_Edge]:
    """The path with each run of one transition drawn once, as "retry (3 times)"."""
    runs: list[tuple[_Edge, int]] = []
    for edge in path:
        if runs and runs[-1][0] == edge:
            runs[-1] = (edge, runs[-1][1] + 1)
        else:
            runs.append((edge, 1))
    return [(src, dst, f"{ev} ({n} times)" if n > 1 else ev) for (src, dst, ev), n in runs]


def _marker(operation_id: str) -> Markup:
    """The hidden marker, for ids that cannot end the HTML comment (ours are UUIDs)."""
    if _ID.fullmatch(operation_id):
        return Markup(status_marker(operation_id))
    # upsert_status_note puts the marker in front of a body that lacks it
    return md_escape(status_marker(operation_id))


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _timeline_row(entry: TimelineEntry) -> dict[str, Any]:
    if entry.stale and entry.source == "command":
        # a command that moved nothing itself (status, help, a refusal): say what became of it
        outcome = (entry.detail or "").split(":", 1)[0] or "noted"
        change: Markup = Markup("command ") + md_escape(outcome)
    elif entry.stale:
        change = Markup("ignored (stale event)")
    else:
        before = code(entry.from_state) if entry.from_state else Markup("—")
        change = Markup(f"{before} → {code(entry.to_state)}")
    return {
        "at": _utc(entry.at),
        "change": change,
        "event": code(entry.event),
        "source": entry.source,
        "actor": entry.actor or Markup("—"),
    }


def _links(view: StatusView, public_url: str) -> list[Markup]:
    base = public_url.rstrip("/")
    found = [
        link("merge request", view.mr_url),
        link("status API", f"{base}/api/v1/changes/{quote(view.operation_id, safe='')}"),
    ]
    links = [item for item in found if item is not None]
    if view.approval_id:
        links.append(Markup("approval request ") + code(view.approval_id))
    return links


def status_context(view: StatusView, public_url: str) -> dict[str, Any]:
    """Everything the template prints, keyed by the names it uses."""
    shown = view.timeline[-TIMELINE_LIMIT:]
    detail = _detail(view)
    return {
        "marker": _marker(view.operation_id),
        "phase_title": phase_title(view.phase),
        "phase_words": _phase_words(view),
        "step_label": f"{view.step.name} ({view.step.value})",
        "operation_id": view.operation_id,
        "hint": view.hint.text,
        "superseded": not view.owns_binding,
        "title": view.title,
        "requested_by": view.requested_by,
        "subject_id": view.subject_id,
        "target_key": view.target_key,
        "merge_commit": view.merge_commit_sha,
        "detail": md_escape(detail, DETAIL_LIMIT) if detail else None,
        "links": Markup(" · ").join(_links(view, public_url)),
        "timeline": [_timeline_row(entry) for entry in shown],
        "timeline_hidden": len(view.timeline) - len(shown),
        "diagram": Markup(path_diagram(_collapsed(view.path)).rstrip("\n")),
    }


def render_context(context: Mapping[str, Any]) -> str:
    """Renders the status comment template with exactly `context` (a missing name raises)."""
    return environment().get_template(TEMPLATE).render(**context)


def render_status(view: StatusView, public_url: str) -> str:
    """The status comment's Markdown, starting with its hidden marker."""
    return render_context(status_context(view, public_url))
