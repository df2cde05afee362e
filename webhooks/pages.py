"""The dashboard (read-only HTML): requests in flight, pending, failed and finished, and the merge
queues; one request.

Server-rendered from `templates/pages/` through bot/render/templates.py's HTML environment
(autoescaped, StrictUndefined, every hidden character shown as `[U+XXXX]`), no JavaScript.
A request gets in through a trusted proxy's header (GITOPS_DASHBOARD_HEADER), a GitLab sign-in
(webhooks/signin.py) or an API client's token with the `read` scope (`Authorization: Bearer`):
webhooks/dashboard_access.py; anyone else gets the 401 page, a client that may not read
everything the 403 page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from flask import Blueprint, Response, g, request

from bot.core.callbacks import host_of
from bot.core.diagram import path_diagram
from bot.core.hints import Hint, hint_for, words
from bot.core.labels import phase_title
from bot.core.states import IN_FLIGHT, TERMINAL, BindingState, Step
from bot.core.table import Effect
from bot.queueing import HOOKS_INTERVAL
from bot.render.queue import place_text
from bot.render.status import StatusView, TimelineEntry, load_status
from bot.render.templates import get_template
from bot.render.templates import utc as utc  # the CLI formats moments from here too
from bot.services import Services
from bot.store.clients import change_owner
from bot.store.engine import Engine
from bot.store.hooks import HooksReport, last_report
from bot.store.inbox import DELIVERIES_WINDOW, quarantined_since
from bot.store.models import utcnow
from bot.store.outbox import OutboxRow, callback_targets, dead_count, unsent_rows
from bot.store.queries import step_name
from bot.store.queue import InLine, all_lines, by_line, head_of
from bot.store.status import ListedRow, overview_rows
from webhooks.api_body import OPERATION_ID
from webhooks.context import services_of
from webhooks.dashboard_access import Visitor, visitor
from webhooks.session import configured

bp = Blueprint("pages", __name__)

#: The dashboard's templates (in bot/render/templates.py's TEMPLATES_DIR).
PAGES = "pages/"
#: Most requests listed in flight, pending and failed together (oldest change first).
ACTIVE_LIMIT = 500
#: Finished requests listed, newest first.
FINISHED_LIMIT = 20
#: Most dead outbox rows listed (the count is of all of them).
DEAD_LIMIT = 50
#: Seconds between automatic reloads of the overview (a meta refresh: no JavaScript).
REFRESH_SECONDS = 60
#: Every page: no script may run, nothing is cached, nobody frames it.
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


#: Where the request's visitor is kept (flask.g) for the pages' header.
_VISITOR = "dashboard_visitor"


def secured(response: Response) -> Response:
    """The response with the dashboard's security headers."""
    response.headers.update(_HEADERS)
    return response


def render(template: str, status: int = 200, **context: Any) -> Response:
    """One page as an HTML response with the dashboard's security headers; the page's header
    names the visitor (and offers to sign out of a GitLab session)."""
    context.setdefault("visitor", getattr(g, _VISITOR, None))
    body = get_template(PAGES + template).render(**context)
    return secured(Response(body, status=status, mimetype="text/html"))


# -- formatting (the CLI shows the same) ----------------------------------------------------------


def duration(seconds: float) -> str:
    """A span for people, to its two largest units: `45s`, `12m 5s`, `3h 20m`, `2d 4h`."""
    left = max(int(seconds), 0)
    days, left = divmod(left, 86400)
    hours, left = divmod(left, 3600)
    minutes, secs = divmod(left, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{n}{unit}" for n, unit in parts[:2] if n or unit == parts[0][1])


@dataclass(frozen=True, slots=True)
class Spent:
    """One timeline entry with the time the request then spent in the state it entered."""

    entry: TimelineEntry
    #: None for a stale event, which entered no state
    seconds: float | None
    #: True for the current state (the time is "so far")
    current: bool


def time_in_states(timeline: Sequence[TimelineEntry], now: datetime) -> list[Spent]:
    """Each entry with the time until the next transition (until `now` for the last one)."""
    moves = [i for i, entry in enumerate(timeline) if entry.transition]
    following = dict(zip(moves, [*moves[1:], None], strict=True))
    spent: list[Spent] = []
    for i, entry in enumerate(timeline):
        if i not in following:
            spent.append(Spent(entry, None, False))
            continue
        after = following[i]
        end = now if after is None else timeline[after].at
        spent.append(Spent(entry, (end - entry.at).total_seconds(), after is None))
    return spent


def error_detail(view: StatusView) -> str | None:
    """The error to show: the operation's own, else what its failing transition recorded."""
    if view.error_detail:
        return view.error_detail
    if view.hint.kind != "failed":
        return None
    moves = [entry for entry in view.timeline if entry.transition]
    return moves[-1].detail if moves else None


def collapsed_path(view: StatusView) -> list[tuple[BindingState | None, BindingState, str]]:
    """The request's path with each run of one transition drawn once ("retry (3 times)")."""
    runs: list[tuple[tuple[BindingState | None, BindingState, str], int]] = []
    for edge in view.path:
        if runs and runs[-1][0] == edge:
            runs[-1] = (edge, runs[-1][1] + 1)
        else:
            runs.append((edge, 1))
    return [(a, b, f"{event} ({n} times)" if n > 1 else event) for (a, b, event), n in runs]


# -- access ---------------------------------------------------------------------------------------


@bp.before_request
def _authenticate() -> Response | None:
    services = services_of()
    found = visitor(services, request)
    if isinstance(found, Visitor):
        setattr(g, _VISITOR, found)
        return None
    if found.status == 403:
        return render("forbidden.html.j2", 403, reason=found.reason)
    response = render("unauthorized.html.j2", 401, signin=configured(services.settings))
    response.headers["WWW-Authenticate"] = 'Bearer realm="gitops-bot"'
    return response


# -- the overview ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Listed:
    """One request as the overview lists it."""

    operation_id: str
    title: str
    project: str
    subject_id: str
    target_key: str
    state: BindingState
    step: Step
    mr_url: str | None
    created_at: datetime
    updated_at: datetime
    #: why it counts as pending besides its hint ("no change for 2h"), else None
    stalled: str | None
    now: datetime

    @property
    def hint(self) -> Hint:
        """What the requester should make of it."""
        return hint_for(self.state, self.step)

    @property
    def phase(self) -> str:
        """The phase in words ("Merging")."""
        return phase_title(self.state)

    @property
    def step_words(self) -> str:
        """The step in words."""
        return words(self.step)

    @property
    def age(self) -> str:
        """Time since the request was made."""
        return duration((self.now - self.created_at).total_seconds())

    @property
    def idle(self) -> str:
        """Time since its last transition."""
        return duration((self.now - self.updated_at).total_seconds())

    @property
    def section(self) -> str:
        """failed, pending, in_flight or finished."""
        if self.hint.kind == "failed":
            return "failed"
        if self.state in TERMINAL:
            return "finished"
        if self.hint.kind == "pending" or self.stalled:
            return "pending"
        return "in_flight"


def _listed(row: ListedRow, now: datetime, threshold: timedelta) -> Listed:
    state = BindingState(row.state)
    stalled = None
    if state in IN_FLIGHT:
        # a future deadline is a wait the bot has planned for (polls, approvers): not stalled
        if row.deadline_at is not None and row.deadline_at < now:
            stalled = f"past its deadline by {duration((now - row.deadline_at).total_seconds())}"
        elif row.deadline_at is None and now - row.updated_at > threshold:
            stalled = f"no change for {duration((now - row.updated_at).total_seconds())}"
    return Listed(
        operation_id=row.id,
        title=row.title,
        project=row.project,
        subject_id=row.subject_id,
        target_key=row.target_key,
        state=state,
        step=Step(row.step),
        mr_url=row.mr_url if _web_url(row.mr_url) else None,
        created_at=row.created_at,
        updated_at=row.updated_at,
        stalled=stalled,
        now=now,
    )


def overview(engine: Engine, now: datetime, threshold: timedelta) -> dict[str, list[Listed]]:
    """The requests that own their binding, by section (two queries)."""
    rows = overview_rows(engine, ACTIVE_LIMIT, FINISHED_LIMIT)
    sections: dict[str, list[Listed]] = {"failed": [], "pending": [], "in_flight": []}
    sections["finished"] = []
    for row in rows:
        listed = _listed(row, now, threshold)
        sections[listed.section].append(listed)
    return sections


@dataclass(frozen=True, slots=True)
class Line:
    """One merge queue as the overview shows it: its branch, the change that merges next, and
    the changes head first (MR links only to web URLs)."""

    project: str
    target_branch: str
    head: str | None
    entries: list[InLine]


def merge_queues(engine: Engine) -> list[Line]:
    """Every merge queue, per project and target branch."""
    return [
        Line(
            project=entries[0].project,
            target_branch=entries[0].target_branch,
            head=head_of(entries),
            entries=[e if _web_url(e.mr_url) else replace(e, mr_url=None) for e in entries],
        )
        for entries in by_line(all_lines(engine))
    ]


def _banner(report: HooksReport | None, now: datetime) -> dict[str, Any] | None:
    """What the hooks banner says (disabled hooks, unprotected `gitops/*`, unreadable projects),
    or None when there is nothing to warn about."""
    if report is None or not (report.disabled or report.errors or report.unprotected):
        return None
    return {
        "report": report,
        "ago": duration((now - report.checked_at).total_seconds()),
        "old": now - report.checked_at > timedelta(seconds=3 * HOOKS_INTERVAL),
    }


@dataclass(frozen=True, slots=True)
class DeadOutbox:
    """The outbox rows that failed for good: how many, and the newest of them."""

    count: int
    rows: list[OutboxRow]
    #: the host each dead callback row was for, by row id (never the URL's path or query)
    targets: dict[int, str] = field(default_factory=dict)


def dead_outbox(engine: Engine) -> DeadOutbox:
    """Dead outbox rows for the overview's banner and section (two queries, three with
    callbacks among them)."""
    count = dead_count(engine)
    rows = unsent_rows(engine, dead_only=True, limit=DEAD_LIMIT) if count else []
    calls = [r for r in rows if r.effect == Effect.CALLBACK]
    urls = callback_targets(engine, sorted({r.operation_id for r in calls}))
    targets = {r.id: host_of(urls[r.operation_id].url) for r in calls if r.operation_id in urls}
    return DeadOutbox(count, rows, targets)


@bp.get("/")
def index() -> Response:
    """In flight, pending, failed and recently finished requests, the merge queues and the dead
    outbox rows, with the hooks banner, a banner while outbox rows are dead and, when
    GITOPS_PROJECTS is unset, a banner saying every project that reaches the bot is managed."""
    services = services_of()
    now = utcnow()
    threshold = timedelta(seconds=services.settings.step_timeout)
    sections = overview(services.engine, now, threshold)
    return render(
        "index.html.j2",
        sections=sections,
        queues=merge_queues(services.engine),
        dead=dead_outbox(services.engine),
        quarantined=quarantined_since(services.engine, now - DELIVERIES_WINDOW),
        step_words=words,
        duration=duration,
        threshold=duration(threshold.total_seconds()),
        banner=_banner(last_report(services.engine), now),
        unscoped=not services.settings.projects,
        refresh=REFRESH_SECONDS,
        now=now,
    )


# -- one request ----------------------------------------------------------------------------------


def _web_url(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("https://", "http://"))


@bp.get("/changes/<operation_id>")
def change(operation_id: str) -> Response:
    """One request: phase, step, hint, error, links, timeline with time in each state, path."""
    services = services_of()
    view = None
    if OPERATION_ID.fullmatch(operation_id):
        view = load_status(services.engine, operation_id)
    if view is None:
        return render("not_found.html.j2", 404, operation_id=operation_id)
    now = utcnow()
    path = collapsed_path(view)
    return render(
        "change.html.j2",
        view=view,
        phase=phase_title(view.phase),
        step_words=words(view.step),
        hint=view.hint,
        detail=error_detail(view),
        queue=place_text(view.queue) if view.queue else None,
        mr_url=view.mr_url if _web_url(view.mr_url) else None,
        timeline=time_in_states(view.timeline, now),
        finished=view.phase in TERMINAL or not view.owns_binding,
        duration=duration,
        step_name=step_name,
        states=[path[0][0] or "(new)", *[to for _, to, _ in path]] if path else [],
        diagram=path_diagram(path).rstrip("\n"),
        client=_client_of(services, operation_id),
        now=now,
    )


def _client_of(services: Services, operation_id: str) -> str | None:
    """The API client that submitted the change (None: not through the API)."""
    owner = change_owner(services.engine, operation_id)
    return owner.api_client if owner else None
