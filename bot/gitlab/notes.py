"""The MR as user interface: the one status comment, the phase label, emoji reactions.

The status comment is found again by a hidden marker carrying the operation id and edited in
place, so re-running never adds a second one; labels change with add_labels/remove_labels in one
call; a reaction already given counts as given. Every note body is checked inert
(bot/core/inert.py) before it is written: a body that is not raises NotInert, and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.inert import ensure_inert
from bot.gitlab.calls import get_list, post_json, put_json
from bot.gitlab.client import Project
from bot.gitlab.errors import GitLabRefused, NotFound
from bot.gitlab.views import NoteView


def status_marker(operation_id: str) -> str:
    """The hidden marker that identifies an operation's status comment."""
    return f"<!-- gitops-bot:status:{operation_id} -->"


def _notes(project: Project, iid: int) -> list[NoteView]:
    rows = get_list(
        project.gl,
        f"{project.mr_path(iid)}/notes",
        what=f"list comments of !{iid}",
        query={"sort": "asc", "order_by": "created_at"},
    )
    return [NoteView.from_json(row) for row in rows]


def find_note(project: Project, iid: int, marker: str, *, author: str | None = None) -> int | None:
    """The id of the oldest comment containing `marker` (by `author` when given), or None."""
    for note in _notes(project, iid):
        if note.system or marker not in note.body:
            continue
        if author is None or note.author == author:
            return note.id
    return None


def upsert_status_note(
    project: Project,
    iid: int,
    operation_id: str,
    body: str,
    note_id: int | None = None,
    *,
    first: bool = False,
) -> int:
    """Writes the operation's status comment: edits the existing one in place, else creates it.

    `note_id`: the comment written last time; it is edited at once (one call). Without it, or
    when it is gone, the comment is found by its marker: only the bot's own comments count
    (anyone can paste the marker into theirs), and an unchanged body is not written again.
    `first`: no status comment of this operation was ever posted (the caller recorded, before
    this call, that one is being posted): it is posted at once, without listing the comments.
    Returns the comment's id.
    """
    marker = status_marker(operation_id)
    text = body if marker in body else f"{marker}\n{body}"
    ensure_inert(text)  # the last check: no quick action, mention or hidden character goes out
    if note_id is not None:
        try:
            put_json(
                project.gl,
                f"{project.mr_path(iid)}/notes/{note_id}",
                what=f"edit status comment on !{iid}",
                data={"body": text},
            )
        except NotFound:
            pass  # deleted by a person: find it again by its marker, or write a new one
        else:
            return note_id
    me = project.account.username()
    for note in [] if first else _notes(project, iid):
        if note.author == me and not note.system and marker in note.body:
            if note.body != text:
                put_json(
                    project.gl,
                    f"{project.mr_path(iid)}/notes/{note.id}",
                    what=f"edit status comment on !{iid}",
                    data={"body": text},
                )
            return note.id
    created = post_json(
        project.gl,
        f"{project.mr_path(iid)}/notes",
        what=f"post status comment on !{iid}",
        data={"body": text},
    )
    return int(created.get("id") or 0)


def set_labels(project: Project, iid: int, add: Sequence[str], remove: Sequence[str]) -> None:
    """Adds and removes labels in one call (scoped labels replace their siblings on their own)."""
    removing = [label for label in remove if label not in add]
    data: dict[str, str] = {}
    if add:
        data["add_labels"] = ",".join(add)
    if removing:
        data["remove_labels"] = ",".join(removing)
    if not data:
        return
    put_json(project.gl, project.mr_path(iid), what=f"set labels of !{iid}", data=data)


def _already_awarded(err: GitLabRefused) -> bool:
    # GitLab answers a repeat award with 404 or 400 "Award Emoji Name has already been taken"
    return err.status_code in (400, 404) and "already been taken" in str(err)


def react(project: Project, iid: int, note_id: int, emoji: str) -> bool:
    """Awards `emoji` on a comment; True when this call awarded it, False when it already was."""
    try:
        post_json(
            project.gl,
            f"{project.mr_path(iid)}/notes/{int(note_id)}/award_emoji",
            what=f"react to comment {int(note_id)} on !{iid}",
            data={"name": emoji},
        )
    except GitLabRefused as err:
        if _already_awarded(err):
            return False
        raise
    return True
