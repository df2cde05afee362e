"""MR comment commands, the job side: a Note event in; who typed it, may they, run it, answer.

Called by `jobs.inbox.route` for every Note Hook. GitLab is read before, and answered after, the
command's one database transaction (bot/workflow/commands.py), never inside it. The note gets a
reaction (👀 accepted, 🚫 refused); a refusal or a help request also gets one short reply. A
reply is posted only by the run whose reaction was new: GitLab keeps one award per user, emoji
and note, so a delivery processed twice (or by two workers at once) replies once.
"""

from __future__ import annotations

import base64
import logging
import re
from typing import Any, assert_never
from urllib.parse import quote

from markupsafe import Markup
from sqlalchemy.engine import Engine

from bot.core.commands import DESCRIPTIONS, Command, Rules, Verb, allowed, parse_command, rules_from
from bot.core.states import Flow
from bot.errors import CannotProceed
from bot.gitlab import GitLabError, MrView, NotFound, Project, member_access_level, react
from bot.gitlab.calls import get_json, get_list, post_json
from bot.gitlab.errors import translating
from bot.ingress.gitlab_events import NoteEvent
from bot.render.status import environment
from bot.services import Services
from bot.store.flags import get_flag
from bot.store.operations import OperationRow, load
from bot.store.submit import NewRequest
from bot.workflow import commands as run
from bot.workflow.commands import CommandResult, Invocation, MrRef
from bot.workflow.outcome import Outcome
from bot.workflow.overload import QUEUE_FULL, queue_full
from jobs import runtime
from jobs.phases.common import short

log = logging.getLogger(__name__)

#: The reaction on an accepted command, and on a refused one (GitLab emoji names).
ACCEPTED_EMOJI = "eyes"
REFUSED_EMOJI = "no_entry_sign"
#: The reply's template in templates/.
REPLY_TEMPLATE = "help.md.j2"
#: A revert restores at most this many files (each costs three reads).
MAX_REVERT_FILES = 50
_USERNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def on_note(services: Services, event: NoteEvent) -> Outcome | None:
    """Runs the note's command, if it holds one; None for ordinary comments."""
    if "/gitops" not in event.note and "@" not in event.note:
        return None  # most comments: no GitLab call, no database read
    author = runtime.clients().author
    me = author.username()  # a failure raises: the delivery is processed again later
    command = parse_command(event.note, me)
    if command is None:
        return None
    engine = services.engine
    extra = {"project_id": event.project_id, "mr_iid": event.mr_iid, "note_id": event.note_id}
    why = ignored_because(event, me)
    if why is not None or event.mr_iid is None:
        why = why or "not on a merge request"
        key = _ignored_key(engine, event)
        verb = command.verb.value
        run.record_ignored(engine, key, verb, event.author_username, event.note_id, why)
        log.info("command ignored: %s", why, extra=extra)
        return Outcome(None, stale=f"command ignored: {why}")
    mr = MrRef(event.project_id, event.project_path, event.mr_iid)
    inv = Invocation(command.verb, event.author_username, event.note_id, command.line)
    project = author.project(event.project_id)
    rules = _rules(engine)
    result = run.previous(engine, mr, event.note_id)
    if result is None:
        result = _decide_and_run(services, project, event, command, mr, inv, rules)
    log.info(
        "command %s %s",
        command.verb.value,
        "accepted" if result.accepted else f"refused: {result.reason}",
        extra={**extra, "operation_id": result.operation_id, "duplicate": result.duplicate},
    )
    _acknowledge(project, mr, event.note_id, command, result, rules, me)
    if result.moved is not None:
        return Outcome(result.operation_id, moved=result.moved)
    done = "already handled" if result.duplicate else "accepted"
    what = done if result.accepted or result.duplicate else f"refused: {result.reason}"
    return Outcome(result.operation_id, stale=f"/gitops {command.verb.value}: {what}")


def ignored_because(event: NoteEvent, bot_username: str) -> str | None:
    """Why a note never runs a command (None: it may)."""
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


def _ignored_key(engine: Engine, event: NoteEvent) -> str:
    if event.mr_iid is None:
        return f"project:{event.project_id}"
    return run.audit_key(engine, MrRef(event.project_id, event.project_path, event.mr_iid))


def _rules(engine: Engine) -> Rules:
    """Who may run what, read per command (a flag change needs no restart)."""
    levels = get_flag(engine, "commands.min_access")
    authors = get_flag(engine, "commands.author_may")
    return rules_from(levels if isinstance(levels, dict) else {}, authors or [])


def _decide_and_run(
    services: Services,
    project: Project,
    event: NoteEvent,
    command: Command,
    mr: MrRef,
    inv: Invocation,
    rules: Rules,
) -> CommandResult:
    """Checks the commenter's rights (fail closed), then runs the verb."""
    engine = services.engine
    if command.problem is not None:
        return run.refuse(engine, mr, inv, command.problem)
    level = _access_level(project, event.author_id) if rules.needs_lookup(command.verb) else None
    is_author = event.mr_author_id is not None and event.mr_author_id == event.author_id
    decision = allowed(command.verb, is_author=is_author, access_level=level, rules=rules)
    if not decision.allowed:
        return run.refuse(engine, mr, inv, decision.reason)
    match command.verb:
        case Verb.HELP:
            return run.accept(engine, mr, inv, "help")
        case Verb.STATUS:
            return run.status(engine, mr, inv)
        case Verb.RETRY:
            return run.retry(engine, mr, inv)
        case Verb.CANCEL:
            return run.cancel(engine, mr, inv)
        case Verb.APPLY | Verb.REVERT if queue_full(engine, services.queue):
            return run.refuse(engine, mr, inv, f"{QUEUE_FULL}; nothing was started, retry later")
        case Verb.APPLY:
            return _apply(engine, project, mr, inv)
        case Verb.REVERT:
            return _revert(engine, project, mr, inv)
        case _:
            assert_never(command.verb)


def _access_level(project: Project, user_id: int) -> int | None:
    """The commenter's access level (0: not a member), or None when GitLab could not say."""
    try:
        level = member_access_level(project, user_id)
    except GitLabError as exc:
        log.warning("membership lookup failed, denying: %s", short(exc))
        return None
    return 0 if level is None else level


def _apply(engine: Engine, project: Project, mr: MrRef, inv: Invocation) -> CommandResult:
    """Registers the person's MR as an MR-first request (the change is the MR itself)."""
    try:
        data = get_json(project.gl, project.mr_path(mr.iid), what=f"read MR !{mr.iid}")
    except CannotProceed as exc:  # GitLab down (TransientError) raises: processed again later
        return run.refuse(engine, mr, inv, f"the merge request could not be read: {short(exc)}")
    view = MrView.from_json(data)
    if view.state != "opened":
        return run.refuse(engine, mr, inv, f"the merge request is {view.state}, not open")
    if view.source_project_id not in (None, view.target_project_id):
        return run.refuse(engine, mr, inv, "the merge request comes from a fork")
    title = data.get("title")
    request = NewRequest(
        subject_id=mr.subject_id,
        target_key=mr.target_key(view.target_branch),
        project=mr.project_path,
        target_branch=view.target_branch,
        title=(title if isinstance(title, str) and title.strip() else f"!{mr.iid}")[:255],
        flow=Flow.MR_FIRST,
        requested_by=inv.actor,
        description=f"Merge request {mr.subject_id}, applied with /gitops apply by {inv.actor}.",
        files=[],
        mr_iid=mr.iid,
        mr_url=view.web_url or None,
    )
    return run.apply(engine, mr, inv, request)


def _revert(engine: Engine, project: Project, mr: MrRef, inv: Invocation) -> CommandResult:
    """Starts a new request whose files put back what the MR's merged change replaced."""
    candidate = run.revert_candidate(engine, mr)
    if isinstance(candidate, str):
        return run.refuse(engine, mr, inv, candidate)
    original = load(engine, candidate.id)
    try:
        files = undo_files(project, original)
    except CannotProceed as exc:
        return run.refuse(engine, mr, inv, f"cannot revert: {short(exc)}")
    request = NewRequest(
        subject_id=candidate.subject_id,
        target_key=candidate.target_key,
        project=original.project,
        target_branch=original.target_branch,
        title=f"Revert: {original.title}"[:255],
        flow=Flow(get_flag(engine, "workflow.order")),
        requested_by=inv.actor,
        description=(
            f"Reverts operation {original.id} (merge request {mr.subject_id}), "
            f"requested with /gitops revert by {inv.actor}."
        ),
        files=files,
        reverts_operation_id=original.id,
    )
    return run.revert(engine, mr, inv, original.id, request)


# -- what a revert writes ------------------------------------------------------------------------


def undo_files(project: Project, op: OperationRow) -> list[dict[str, str]]:
    """The files of a change that undoes `op`: each path it touched, as it was before the merge.

    Refuses (CannotProceed) when a path changed again after the merge (restoring it would undo
    someone else's work too), when the change is too large, or when it cannot be read.
    """
    merged = op.merge_commit_sha
    if not merged and op.mr_iid is not None:
        data = get_json(project.gl, project.mr_path(op.mr_iid), what=f"read MR !{op.mr_iid}")
        merged = MrView.from_json(data).merged_sha
    if not merged:
        raise CannotProceed("the merge commit of the change is not known")
    paths = _touched_paths(project, op)
    if not paths:
        raise CannotProceed("the change touched no files")
    if len(paths) > MAX_REVERT_FILES:
        raise CannotProceed(f"the change touches more than {MAX_REVERT_FILES} files")
    before = _before_merge(project, merged, op.mr_iid)
    files: list[dict[str, str]] = []
    undoes_something = False
    for path in paths:
        after = read_file(project, path, merged)
        if read_file(project, path, op.target_branch) != after:
            raise CannotProceed(f"{path} changed again after the merge; revert it by hand")
        old = read_file(project, path, before)
        undoes_something = undoes_something or old != after
        files.append(_restore(path, old))
    if not undoes_something:
        raise CannotProceed("the merge changed none of the files it lists")
    return files


def read_file(project: Project, path: str, ref: str) -> bytes | None:
    """A file's bytes at `ref`, or None when it does not exist there (python-gitlab, one GET)."""
    what = f"read {path} at {ref[:40]}"
    try:
        with translating(what):
            remote = project.gl.projects.get(project.id, lazy=True).files.get(
                file_path=path, ref=ref
            )
    except NotFound:
        return None
    return remote.decode()


def _restore(path: str, old: bytes | None) -> dict[str, str]:
    """The change file that puts `path` back to `old` (None: it did not exist, delete it)."""
    if old is None:
        return {"path": path, "action": "delete"}
    try:
        return {"path": path, "content": old.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "path": path,
            "content": base64.b64encode(old).decode("ascii"),
            "encoding": "base64",
        }


def _touched_paths(project: Project, op: OperationRow) -> list[str]:
    """The paths a change wrote: its request's files, or for `/gitops apply` the MR's diff."""
    paths: list[str] = []
    rows: list[dict[str, Any]] = list(op.files)
    if not rows and op.mr_iid is not None:
        rows = _mr_diffs(project, op.mr_iid)
    for row in rows:
        for key in ("path", "old_path", "new_path"):
            value = row.get(key)
            if isinstance(value, str) and value and value not in paths:
                paths.append(value)
    return paths


def _mr_diffs(project: Project, iid: int) -> list[dict[str, Any]]:
    """The MR's changed files (GET .../diffs, GitLab 15.7+; else the older .../changes)."""
    try:
        return get_list(
            project.gl,
            f"{project.mr_path(iid)}/diffs",
            what=f"list the changes of !{iid}",
            limit=MAX_REVERT_FILES + 1,
        )
    except NotFound:
        data = get_json(
            project.gl, f"{project.mr_path(iid)}/changes", what=f"read the changes of !{iid}"
        )
    if data.get("overflow") is True:
        raise CannotProceed(f"the change touches more than {MAX_REVERT_FILES} files")
    changes = data.get("changes")
    return [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []


def _before_merge(project: Project, merged: str, mr_iid: int | None) -> str:
    """The target branch's commit just before the merge: a merge commit's first parent, or the
    MR's base after a fast-forward (the squash commit's parent when there is no MR)."""
    commit = get_json(
        project.gl,
        f"{project.path}/repository/commits/{quote(merged, safe='')}",
        what=f"read commit {merged[:12]}",
    )
    parents = [p for p in commit.get("parent_ids") or [] if isinstance(p, str) and p]
    if len(parents) >= 2:
        return parents[0]
    if mr_iid is not None:
        data = get_json(project.gl, project.mr_path(mr_iid), what=f"read MR !{mr_iid}")
        refs = data.get("diff_refs")
        base = refs.get("base_sha") if isinstance(refs, dict) else None
        if isinstance(base, str) and base and base != merged:
            return base
    if parents:
        return parents[0]
    raise CannotProceed(f"commit {merged[:12]} has no parent to restore from")


# -- answering -----------------------------------------------------------------------------------


def _acknowledge(
    project: Project,
    mr: MrRef,
    note_id: int,
    command: Command,
    result: CommandResult,
    rules: Rules,
    bot_username: str,
) -> None:
    """Reacts on the note; replies (refusal, help) only when this run's reaction was new."""
    emoji = ACCEPTED_EMOJI if result.accepted else REFUSED_EMOJI
    extra = {"project_id": mr.project_id, "mr_iid": mr.iid, "note_id": note_id}
    try:
        fresh = react(project, mr.iid, note_id, emoji)
    except GitLabError as exc:
        log.warning("could not react to the command: %s", short(exc), extra=extra)
        return
    show_help = command.verb is Verb.HELP or command.problem is not None
    if not fresh or (result.accepted and not show_help):
        return
    body = render_reply(
        note_id=note_id,
        command=command,
        reason=None if result.accepted else result.reason,
        show_help=show_help,
        rules=rules,
        bot_username=bot_username,
    )
    try:
        post_json(
            project.gl,
            f"{project.mr_path(mr.iid)}/notes",
            what=f"reply to comment {note_id} on !{mr.iid}",
            data={"body": body},
        )
    except GitLabError as exc:
        log.warning("could not reply to the command: %s", short(exc), extra=extra)


def render_reply(
    *,
    note_id: int,
    command: Command,
    reason: str | None,
    show_help: bool,
    rules: Rules,
    bot_username: str,
) -> str:
    """The reply to a refused command or a help request (templates/help.md.j2)."""

    def usage(verb: Verb) -> Markup:
        return Markup(f"`/gitops {verb.value}`")

    rows = [{"usage": usage(v), "what": DESCRIPTIONS[v], "who": rules.who(v)} for v in Verb]
    mention = Markup(f"`@{bot_username} <command>`") if _USERNAME.fullmatch(bot_username) else None
    context = {
        "marker": Markup(f"<!-- gitops-bot:reply:{int(note_id)} -->"),
        "command": usage(command.verb) if command.problem is None else Markup("Your command"),
        "reason": reason,
        "show_help": show_help,
        "commands": rows,
        "mention": mention,
    }
    return environment().get_template(REPLY_TEMPLATE).render(**context)
