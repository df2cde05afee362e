"""MR comment commands, the job side: a Note event in; who typed it, may they, run it, answer.

Called by `jobs.inbox.route` for every Note Hook. The payload only tells which note to look at
(and what can be skipped for free); the note itself, its author and the MR are read from GitLab
(bot/app/commands/facts.py) before the command's one database transaction
(bot/app/commands/verbs.py), never inside it, and the answer (bot/app/commands/reply.py)
comes after:
a reaction always, a reply to a refusal or a help request at most once per user and MR per
GITOPS_REPLY_WINDOW. `/gitops apply` and `/gitops revert` check the paths they would change
against the same path policy as the REST API (bot/app/commands/paths.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import assert_never

from bot.app import policy
from bot.app.commands import verbs as run
from bot.app.commands.facts import (
    Ignored,
    MrFacts,
    NoteFacts,
    payload_ignored_because,
    read_mr,
    read_note,
)
from bot.app.commands.paths import Start, apply_refusal, revert_refusal
from bot.app.commands.reply import Commenter, acknowledge
from bot.app.commands.revert_files import undo_files
from bot.app.commands.verbs import CommandVerdict, Invocation, MrRef
from bot.app.events.handled import EventHandled
from bot.app.events.overload import QUEUE_FULL, queue_full
from bot.app.steps.common import short
from bot.core.commands import MAINTAINER, Command, Rules, Verb, allowed, parse_command
from bot.core.managed import is_managed
from bot.core.states import Flow
from bot.errors import CannotProceed
from bot.gitlab import GitLabError, Project, member_access_level
from bot.ingress.gitlab_events import NoteEvent
from bot.policy import Policy
from bot.services import Services
from bot.store.commands import mr_operations_of
from bot.store.flags import get_flag
from bot.store.operations import load
from bot.store.submit import NewRequest

log = logging.getLogger(__name__)


def on_note(services: Services, event: NoteEvent) -> EventHandled | None:
    """Runs the note's command, if it holds one; None for ordinary comments."""
    if "/gitops" not in event.note and "@" not in event.note:
        return None  # most comments: no GitLab call, no database read
    author = services.require_clients().author
    me = author.username()  # a failure raises: the delivery is processed again later
    claimed = parse_command(event.note, me)
    if claimed is None:
        return None  # the payload holds no command: nothing to read (it can only hold less)
    engine = services.engine
    extra = {"project_id": event.project_id, "mr_iid": event.mr_iid, "note_id": event.note_id}
    why = payload_ignored_because(event, me)
    if why is None and not is_managed(
        services.settings.projects, project_id=event.project_id, path=event.project_path
    ):
        why = "its project is not in GITOPS_PROJECTS"
    if why is not None or event.mr_iid is None:
        return _ignore(services, event, claimed.verb.value, event.author_username, why, extra)
    project = author.project(event.project_id)
    actor = event.author_username  # until GitLab says who wrote the note
    try:
        note = read_note(project, event.mr_iid, event.note_id, me)
        actor = note.author_username
        command = parse_command(note.body, me)
        if command is None:
            raise Ignored("the comment GitLab holds is not a command")
        facts = read_mr(project, event.mr_iid, services.settings.projects)
    except Ignored as exc:
        return _ignore(services, event, claimed.verb.value, actor, str(exc), extra)
    mr = MrRef(facts.project_id, facts.project_path, event.mr_iid)
    inv = Invocation(command.verb, note.author_username, note.id, command.line)
    start = _policy_at_start(services, facts, command.verb)
    rules = _rules(services, _governing(services, mr, start))
    result = run.previous(engine, mr, note.id)
    if result is None:
        result = _decide_and_run(services, project, note, facts, command, mr, inv, rules, start)
    log.info(
        "command %s %s",
        command.verb.value,
        "accepted" if result.accepted else f"refused: {result.reason}",
        extra={**extra, "operation_id": result.operation_id, "duplicate": result.duplicate},
    )
    acknowledge(
        services,
        project,
        mr,
        note.id,
        command,
        result,
        rules=rules,
        bot_username=me,
        commenter=Commenter(note.author_id, note.author_username),
    )
    if result.moved is not None:
        return EventHandled(result.operation_id, moved=result.moved)
    done = "already handled" if result.duplicate else "accepted"
    what = done if result.accepted or result.duplicate else f"refused: {result.reason}"
    return EventHandled(result.operation_id, stale=f"/gitops {command.verb.value}: {what}")


def _ignore(
    services: Services,
    event: NoteEvent,
    verb: str,
    actor: str,
    why: str | None,
    extra: Mapping[str, object],
) -> EventHandled:
    """Audits a note that never runs (no reaction, no reply) and says so in the log."""
    why = why or "not on a merge request"
    engine = services.engine
    key = _ignored_key(services, event)
    run.record_ignored(engine, key, verb, actor, event.note_id, why)
    log.info("command ignored: %s", why, extra=extra)
    return EventHandled(None, stale=f"command ignored: {why}")


def _ignored_key(services: Services, event: NoteEvent) -> str:
    if event.mr_iid is None:
        return f"project:{event.project_id}"
    return run.audit_key(services.engine, MrRef(event.project_id, event.project_path, event.mr_iid))


def _rules(services: Services, rules: Policy) -> Rules:
    """Who may run what, read per command (a flag change needs no restart); the project's
    policy file's levels over the flag's."""
    levels = get_flag(services.engine, "commands.min_access")
    authors = get_flag(services.engine, "commands.author_may")
    return policy.command_rules(rules, levels if isinstance(levels, dict) else {}, authors or [])


def _policy_at_start(
    services: Services, facts: MrFacts, verb: Verb
) -> policy.Recorded | policy.StartRefused | None:
    """For a verb that starts a change (apply, revert): the target branch resolved and allowed
    and the policy file at its head commit (two GitLab reads), or why no change may start;
    None for the other verbs."""
    if verb not in (Verb.APPLY, Verb.REVERT):
        return None
    try:
        return policy.read_at_start(services, facts.project_path, facts.view.target_branch)
    except policy.StartRefused as exc:
        return exc


def _governing(
    services: Services, mr: MrRef, start: policy.Recorded | policy.StartRefused | None
) -> Policy:
    """The policy deciding who may run the command: the one a new change would start with, else
    the one recorded on the MR's change (never read again), else the defaults."""
    if isinstance(start, policy.Recorded):
        return start.policy
    engine = services.engine
    if start is None and (
        carried := mr_operations_of(engine, mr.project_id, mr.project_path, mr.iid)
    ):
        return policy.of(load(engine, carried[0].id))
    return Policy()


def _decide_and_run(
    services: Services,
    project: Project,
    note: NoteFacts,
    facts: MrFacts,
    command: Command,
    mr: MrRef,
    inv: Invocation,
    rules: Rules,
    start: policy.Recorded | policy.StartRefused | None,
) -> CommandVerdict:
    """Checks the commenter's rights as GitLab states them (fail closed), then runs the verb."""
    engine = services.engine
    if command.problem is not None:
        return run.refuse(engine, mr, inv, command.problem)
    level = _access_level(project, note.author_id) if rules.needs_lookup(command.verb) else None
    is_author = facts.author_id is not None and facts.author_id == note.author_id
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
        case Verb.APPLY | Verb.REVERT if isinstance(start, policy.StartRefused):
            return run.refuse(engine, mr, inv, start.reason)
        case Verb.APPLY:
            return _apply(services, project, facts, mr, inv, _started(project, note, level, start))
        case Verb.REVERT:
            return _revert(services, project, mr, inv, _started(project, note, level, start))
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


def _started(
    project: Project,
    note: NoteFacts,
    level: int | None,
    start: policy.Recorded | policy.StartRefused | None,
) -> Start:
    """What a change started by this command records: the policy, and whether a Maintainer
    asked (who may change the policy's protected paths)."""
    recorded = start if isinstance(start, policy.Recorded) else policy.NOT_READ
    if level is None:
        level = _access_level(project, note.author_id)
    return Start(recorded, maintainer=level is not None and level >= MAINTAINER)


def _apply(
    services: Services,
    project: Project,
    facts: MrFacts,
    mr: MrRef,
    inv: Invocation,
    start: Start,
) -> CommandVerdict:
    """Registers the person's MR as an MR-first request (the change is the MR itself), once its
    changed paths pass the path policy."""
    engine = services.engine
    view = facts.view
    if view.state != "opened":
        return run.refuse(engine, mr, inv, f"the merge request is {view.state}, not open")
    try:
        refusal = apply_refusal(
            project,
            view,
            start.base(view.target_branch),
            *start.paths(services),
            maintainer=start.maintainer,
            unlocking=policy.unlocking_paths(services.settings),
        )
    except CannotProceed as exc:  # GitLab down (TransientError) raises: processed again later
        reason = f"the merge request's paths could not be read: {short(exc)}"
        return run.refuse(engine, mr, inv, reason)
    if refusal is not None:
        return run.refuse(engine, mr, inv, refusal)
    title = facts.data.get("title")
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
        **start.recorded_fields(),
    )
    # a Maintainer's authority covers the head whose paths were just checked, no later one
    head = view.sha if start.maintainer else None
    return run.apply(engine, mr, inv, request, maintainer_head=head)


def _revert(
    services: Services, project: Project, mr: MrRef, inv: Invocation, start: Start
) -> CommandVerdict:
    """Starts a new request whose files put back what the MR's merged change replaced, once the
    paths it would write pass the path policy."""
    engine = services.engine
    candidate = run.revert_candidate(engine, mr)
    if isinstance(candidate, str):
        return run.refuse(engine, mr, inv, candidate)
    original = load(engine, candidate.id)
    try:
        files = undo_files(project, original)
        refusal = revert_refusal(
            project,
            [f["path"] for f in files],
            start.base(original.target_branch),
            *start.paths(services),
            maintainer=start.maintainer,
            unlocking=policy.unlocking_paths(services.settings),
        )
    except CannotProceed as exc:
        return run.refuse(engine, mr, inv, f"cannot revert: {short(exc)}")
    if refusal is not None:
        return run.refuse(engine, mr, inv, refusal)
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
        **start.recorded_fields(),
    )
    return run.revert(engine, mr, inv, original.id, request)
