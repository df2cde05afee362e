"""Notes and award emoji: the operations, and their routes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import render_mr
from .errors import forbidden, not_found
from .model import Award, MergeRequest, Note, Project, User
from .routing import Ctx, Reply, router

if TYPE_CHECKING:
    from .state import State

NOTE = "/projects/{project}/merge_requests/{iid:int}/notes"


def add_note(
    state: State, project: Project, mr: MergeRequest, author: User, body: str, system: bool = False
) -> Note:
    """Stores a note and queues the Note Hook (`action: create`)."""
    now = state.clock()
    note = Note(state.next_id("note", 3000), body, author.id, mr.iid, now, now, system)
    mr.notes[note.id] = note
    state.emit(project, "note", mr=mr, note=note, actor=author, action="create")
    return note


def edit_note(state: State, project: Project, mr: MergeRequest, note: Note, body: str) -> None:
    """Edits a note; GitLab re-fires the Note Hook with `action: update` (16.11+)."""
    note.body = body
    note.updated_at = state.clock()
    author = state.users[note.author_id]
    state.emit(project, "note", mr=mr, note=note, actor=author, action="update")


def award(state: State, note: Note, user: User, name: str) -> Award:
    """Awards an emoji; GitLab's 404 wording when this user already gave this one."""
    if any(a.name == name and a.user_id == user.id for a in note.awards):
        raise not_found("Award Emoji Name has already been taken Not Found")
    given = Award(state.next_id("award", 7000), name, user.id, note.id, state.clock())
    note.awards.append(given)
    return given


def _note(ctx: Ctx) -> tuple[Project, MergeRequest, Note]:
    """The project, MR and note named in the path."""
    project = ctx.project()
    mr = ctx.mr(project)
    note = mr.notes.get(int(ctx.args["note_id"]))
    if note is None:
        raise not_found("Not found")
    return project, mr, note


@router.route("GET", NOTE)
def list_notes(ctx: Ctx) -> Reply:
    """The MR's notes, newest first (GitLab's default `created_at desc`)."""
    project = ctx.project()
    mr = ctx.mr(project)
    notes = sorted(mr.notes.values(), key=lambda n: n.id, reverse=ctx.text("sort") != "asc")
    return ctx.paginate([render_mr.note(ctx.state, project, mr, n) for n in notes])


@router.route("POST", NOTE)
def create_note(ctx: Ctx) -> Reply:
    """Comments as the caller."""
    project = ctx.project()
    mr = ctx.mr(project)
    note = add_note(ctx.state, project, mr, ctx.user, str(ctx.require("body")))
    return Reply(201, render_mr.note(ctx.state, project, mr, note))


@router.route("GET", NOTE + "/{note_id:int}")
def get_note(ctx: Ctx) -> Reply:
    """One note."""
    project, mr, note = _note(ctx)
    return Reply(200, render_mr.note(ctx.state, project, mr, note))


@router.route("PUT", NOTE + "/{note_id:int}")
def update_note(ctx: Ctx) -> Reply:
    """Edits the caller's own note (403 for anyone else's)."""
    project, mr, note = _note(ctx)
    if note.author_id != ctx.user.id:
        raise forbidden()
    edit_note(ctx.state, project, mr, note, str(ctx.require("body")))
    return Reply(200, render_mr.note(ctx.state, project, mr, note))


@router.route("GET", NOTE + "/{note_id:int}/award_emoji")
def list_awards(ctx: Ctx) -> Reply:
    """The note's award emoji."""
    _, _, note = _note(ctx)
    return ctx.paginate([render_mr.award(ctx.state, a) for a in note.awards])


@router.route("POST", NOTE + "/{note_id:int}/award_emoji")
def create_award(ctx: Ctx) -> Reply:
    """Awards an emoji as the caller (anyone who can see the MR may)."""
    _, _, note = _note(ctx)
    given = award(ctx.state, note, ctx.user, str(ctx.require("name")))
    return Reply(201, render_mr.award(ctx.state, given))


@router.route("DELETE", NOTE + "/{note_id:int}/award_emoji/{award_id:int}")
def delete_award(ctx: Ctx) -> Reply:
    """Removes the caller's own award."""
    _, _, note = _note(ctx)
    given = next((a for a in note.awards if a.id == int(ctx.args["award_id"])), None)
    if given is None:
        raise not_found("Not found")
    if given.user_id != ctx.user.id:
        raise forbidden()
    note.awards.remove(given)
    return Reply(204)
