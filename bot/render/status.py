"""The MR's one status comment: what it shows, read from the database, rendered from templates/.

`load_status` (bot/store/status.py) reads an operation as the comment shows it (two queries);
`render_status` turns that into Markdown through `templates/status_comment.md.j2`. Every value
the template prints is escaped for Markdown and HTML (bot/render/markdown.py) unless it is
`Markup` built here from known-safe parts, so text a requester typed (title, names, error
details) can never add markup, ping anyone, hide a bidi character, or put a `/gitops` command or
a GitLab quick action at the start of a line of the bot's own note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from bot.core.diagram import path_diagram
from bot.core.hints import words
from bot.core.labels import phase_title
from bot.core.states import FAILED
from bot.gitlab.notes import status_marker
from bot.render.markdown import TEXT_LIMIT, code, link, md_escape
from bot.render.preview import preview_markdown
from bot.render.queue import WRITTEN, place_words
from bot.render.templates import TEMPLATES_DIR, get_template, utc
from bot.store.queue import Place
from bot.store.status import Edge, StatusView, TimelineEntry, load_status

# the escaping helpers and the status view lived here first: their importers keep importing
# them from here
__all__ = [
    "DETAIL_LIMIT",
    "TEMPLATE",
    "TEMPLATES_DIR",
    "TEXT_LIMIT",
    "TIMELINE_LIMIT",
    "StatusView",
    "TimelineEntry",
    "code",
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
#: Longest error detail shown (of each line, for a detail of several lines).
DETAIL_LIMIT = 500
#: Most lines of an error detail shown (the checks write one per problem, at most 21).
DETAIL_LINES = 21

#: What may go into the marker untouched (ids, enum names, SHAs).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: A branch name shown as a code span as it is (no backtick, space, `@` or other sigil); any
#: other is escaped text.
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]*")


def _phase_words(view: StatusView) -> str:
    """The phase line after the phase's name ("waiting for the merge request's check pipeline")."""
    text = words(view.step)
    if view.phase in FAILED:
        return f"stopped while {text}"
    # "Merged: merged; waiting for ..." says it twice
    return text.removeprefix(f"{phase_title(view.phase).lower()}; ")


#: What GitLab's wait statuses mean, as the status comment says them.
WAIT_WORDS = {
    "status_checks_must_pass": "external status checks have not all passed",
    "merge_time": "the merge_after time set on the merge request has not come",
    "checking": "GitLab is checking whether it can be merged",
    "unchecked": "GitLab has not checked whether it can be merged yet",
    "ci_still_running": "the pipeline is still running",
    "approvals_syncing": "GitLab is updating its approvals",
    "preparing": "GitLab is preparing the merge request",
}


def _waiting_words(why: str | None) -> Markup | None:
    """GitLab's word for the wait, as code, and what it means (None: not waiting on GitLab)."""
    if why is None:
        return None
    status = why.split(":", 1)[0].strip()
    if not _ID.fullmatch(status):
        return Markup("{}").format(md_escape(why, DETAIL_LIMIT))
    meaning = WAIT_WORDS.get(status)
    code = Markup("`{}`").format(status)
    return code if meaning is None else Markup("{}: {}").format(code, meaning)


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


def _detail_lines(detail: str) -> Markup:
    """The error as escaped text; several lines (a check's file:line:col problems) each on a
    line of their own (`<br>`), at most DETAIL_LINES of DETAIL_LIMIT characters."""
    lines = [line for line in detail.split("\n") if line.strip()]
    if len(lines) < 2:
        return md_escape(detail, DETAIL_LIMIT)
    return Markup("<br>").join(md_escape(line, DETAIL_LIMIT) for line in lines[:DETAIL_LINES])


def _collapsed(path: list[Edge]) -> list[Edge]:
    """The path with each run of one transition drawn once, as "retry (3 times)"."""
    runs: list[tuple[Edge, int]] = []
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


def _queue_line(place: Place | None) -> Markup | None:
    """Where the change stands in its merge queue: "3rd in line for `main` when this comment
    was written (2 ahead)". The comment is written again when the change enters the line, when
    it becomes the head and when an operator moves it, not when others leave: a position below
    the head says when it held."""
    if place is None:
        return None
    name = place.target_branch
    plain = _BRANCH.fullmatch(name) and len(name) <= TEXT_LIMIT
    branch = Markup(f"`{name}`") if plain else md_escape(name)
    return Markup(place_words(place, str(branch), when=WRITTEN))


def _timeline_row(entry: TimelineEntry) -> dict[str, Any]:
    if entry.stale and entry.source == "command":
        # a command that moved nothing itself (status, help, a refusal): say what became of it
        outcome = (entry.detail or "").split(":", 1)[0] or "noted"
        change: Markup = Markup("command ") + md_escape(outcome)
    elif entry.stale:
        change = md_escape(entry.unmoved)  # ignored, or an operator's promotion
    else:
        before = code(entry.from_state) if entry.from_state else Markup("—")
        change = Markup(f"{before} → {code(entry.to_state)}")
    return {
        "at": utc(entry.at),
        "change": change,
        "event": code(entry.event),
        "source": entry.source,
        "actor": entry.actor or Markup("—"),
    }


def _policy_line(view: StatusView, policy_files: bool = True) -> Markup:
    """Which repository policy the change follows: the file at the commit it was read at, or
    the environment's settings, and why (policy files off, or no file at that commit)."""
    if not policy_files and not view.policy_file:
        return Markup("defaults (the environment's settings: policy files are off)")
    if view.policy_sha is None:  # started before the target's head was always recorded
        return Markup(
            "defaults (the environment's settings: the target branch has no `.gitops/bot.yml`)"
        )
    short_sha = code(view.policy_sha[:7])
    if view.policy_file:
        return Markup("`.gitops/bot.yml` at ") + short_sha
    return Markup("defaults (no `.gitops/bot.yml` at ") + short_sha + Markup(")")


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


def status_context(
    view: StatusView, public_url: str, *, policy_files: bool = True
) -> dict[str, Any]:
    """Everything the template prints, keyed by the names it uses (`policy_files`:
    GITOPS_POLICY_FILES, which says why a change recorded no policy commit)."""
    shown = view.timeline[-TIMELINE_LIMIT:]
    detail = _detail(view)
    return {
        "marker": _marker(view.operation_id),
        "phase_title": phase_title(view.phase),
        "phase_words": _phase_words(view),
        "step_label": f"{view.step.name} ({view.step.value})",
        "queue": _queue_line(view.queue),
        "waiting_on": _waiting_words(view.waiting_on),
        "operation_id": view.operation_id,
        "hint": view.hint.text,
        "superseded": not view.owns_binding,
        "title": view.title,
        "requested_by": view.requested_by,
        "subject_id": view.subject_id,
        "target_key": view.target_key,
        "merge_commit": view.merge_commit_sha,
        "policy": _policy_line(view, policy_files),
        "detail": _detail_lines(detail) if detail else None,
        "preview": preview_markdown(view.preview, view.mr_url),
        "links": Markup(" · ").join(_links(view, public_url)),
        "timeline": [_timeline_row(entry) for entry in shown],
        "timeline_hidden": len(view.timeline) - len(shown),
        "diagram": Markup(path_diagram(_collapsed(view.path)).rstrip("\n")),
    }


def render_context(context: Mapping[str, Any]) -> str:
    """Renders the status comment template with exactly `context` (a missing name raises)."""
    return get_template(TEMPLATE).render(**context)


def render_status(view: StatusView, public_url: str, *, policy_files: bool = True) -> str:
    """The status comment's Markdown, starting with its hidden marker."""
    return render_context(status_context(view, public_url, policy_files=policy_files))
