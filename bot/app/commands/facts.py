"""Who typed a command, and on what: read from GitLab before acting, never taken from the payload.

Anyone holding the one webhook secret can post a Note Hook naming any author, any body and any
`system` flag. So the payload only decides what can be skipped at no cost (a note that is not a
command, an edit, a system note; skipping never gives anyone more); everything a command acts on
is read from GitLab: the note (its author's id and username, its body, `system`) with one GET,
and the MR (its author, state, source and target project, the project's path) with one more,
the same read `/gitops apply` uses. A note or MR GitLab does not know is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.app.steps.common import short
from bot.core.managed import is_managed
from bot.errors import CannotProceed
from bot.gitlab import MrView, NotFound, Project
from bot.gitlab.calls import get_json
from bot.ingress.gitlab_events import NoteEvent


@dataclass(frozen=True, slots=True)
class NoteFacts:
    """A comment as GitLab holds it (never a system note: those are ignored)."""

    id: int
    body: str
    author_id: int
    author_username: str


@dataclass(frozen=True, slots=True)
class MrFacts:
    """A merge request as GitLab holds it (the JSON kept for the apply that reuses it)."""

    view: MrView
    data: dict[str, Any]
    project_id: int
    #: the project's path as GitLab spells it (from `references.full`)
    project_path: str
    author_id: int | None

    @property
    def from_fork(self) -> bool:
        """True when the MR's source project is another one than its target."""
        source, target = self.view.source_project_id, self.view.target_project_id
        return source is not None and target is not None and source != target


class Ignored(Exception):
    """The note never runs a command; the message says why (for the audit row)."""


def payload_ignored_because(event: NoteEvent, bot_username: str) -> str | None:
    """Why a note never runs, judged from the payload alone (None: read GitLab to know).

    Only reasons that skip work: a forged payload can make the bot do less, never more.
    """
    if event.noteable_type != "MergeRequest" or event.mr_iid is None:
        return "not on a merge request"
    if event.action != "create":
        return f"an edited comment (action {event.action[:20]})"
    if event.system:
        return "a system note"
    if event.author_username.lower() == bot_username.lower():
        return "the bot's own comment"
    if event.from_fork:
        return "a merge request from a fork"
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_note(project: Project, iid: int, note_id: int, bot_username: str) -> NoteFacts:
    """The note as GitLab holds it (one GET); Ignored when it is unknown, a system note or the
    bot's own. GitLab being unavailable raises its transient error (processed again later)."""
    path = f"{project.mr_path(iid)}/notes/{int(note_id)}"
    try:
        data = get_json(project.gl, path, what=f"read comment {int(note_id)} on !{iid}")
    except NotFound:
        raise Ignored("GitLab does not know this comment") from None
    except CannotProceed as exc:
        raise Ignored(f"the comment could not be read: {short(exc)}") from None
    author = data.get("author")
    author_id = _int(author.get("id")) if isinstance(author, dict) else None
    username = author.get("username") if isinstance(author, dict) else None
    body = data.get("body")
    if author_id is None or not isinstance(username, str) or not isinstance(body, str):
        raise Ignored("GitLab answered the comment without its author or body")
    if data.get("system") is not False:
        raise Ignored("a system note")
    if username.lower() == bot_username.lower():
        raise Ignored("the bot's own comment")
    return NoteFacts(int(note_id), body, author_id, username)


def read_mr(project: Project, iid: int, projects: tuple[str, ...]) -> MrFacts:
    """The MR as GitLab holds it (one GET); Ignored when it is unknown, comes from a fork, or
    its project is not on the GITOPS_PROJECTS allow-list."""
    try:
        data = get_json(project.gl, project.mr_path(iid), what=f"read MR !{iid}")
    except NotFound:
        raise Ignored("GitLab does not know this merge request") from None
    except CannotProceed as exc:
        raise Ignored(f"the merge request could not be read: {short(exc)}") from None
    view = MrView.from_json(data)
    refs = data.get("references")
    full = refs.get("full") if isinstance(refs, dict) else None
    path, bang, number = full.rpartition("!") if isinstance(full, str) else ("", "", "")
    project_id = _int(data.get("project_id")) or view.target_project_id
    if not (path and bang and number == str(iid)) or project_id is None:
        raise Ignored("GitLab answered the merge request without its project")
    author = data.get("author")
    facts = MrFacts(
        view=view,
        data=data,
        project_id=project_id,
        project_path=path,
        author_id=_int(author.get("id")) if isinstance(author, dict) else None,
    )
    if facts.from_fork:
        raise Ignored("a merge request from a fork")
    if not is_managed(projects, project_id=project_id, path=path):
        raise Ignored("its project is not in GITOPS_PROJECTS")
    return facts
