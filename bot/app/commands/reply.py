"""Answering an MR command: the emoji reaction always, one short reply at most per user and MR.

The note gets a reaction (👀 accepted, 🚫 refused). A refusal or a help request also gets a reply,
but only from the run whose reaction was new (GitLab keeps one award per user, emoji and note,
so a delivery processed twice replies once) and only when the commenter had no reply on this MR
within GITOPS_REPLY_WINDOW (bot/app/commands/reply_limit.py): anyone, member or not, could otherwise
make the author account spend the note rate limit its status comments need.

Replies are inert: every value is escaped as user text (templates/help.md.j2 through
bot/render/status.py's environment), a reason's code spans (paths) are rebuilt here so that
nothing inside them can end the span, break the line or carry a control character, no line of a
reply starts with a command or a quick action, and `ensure_inert` (bot/core/inert.py) checks the
whole body before it is posted (a body that fails is never posted).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass

from markupsafe import Markup
from prometheus_client import Counter

from bot.app.commands.reply_limit import claim_reply
from bot.app.commands.verbs import CommandVerdict, MrRef
from bot.app.steps.common import short
from bot.core.commands import DESCRIPTIONS, Command, Rules, Verb
from bot.core.inert import ensure_inert
from bot.gitlab import GitLabError, Project, react
from bot.gitlab.calls import post_json
from bot.render.status import md_escape
from bot.render.templates import get_template
from bot.services import Services

log = logging.getLogger(__name__)

#: The reaction on an accepted command, and on a refused one (GitLab emoji names).
ACCEPTED_EMOJI = "eyes"
REFUSED_EMOJI = "no_entry_sign"
#: The reply's template in templates/.
REPLY_TEMPLATE = "help.md.j2"
_USERNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: A code span in a reason: a run of backticks, the text, the same run (CommonMark).
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
#: Longest text shown in one code span.
_SPAN_LIMIT = 200

REPLIES = Counter(
    "gitops_command_replies_total",
    "Replies to MR commands (refusals, help): posted, or held back by the per-user window.",
    ["outcome"],
)


@dataclass(frozen=True, slots=True)
class Commenter:
    """Who typed the command, as GitLab says: the reply window is kept per user id."""

    user_id: int
    username: str


def code_span(text: str) -> str:
    """`text` as one inline code span that nothing in it can end or break: control, format and
    separator characters shown as `[U+XXXX]`, a fence longer than any backtick run inside."""
    shown = "".join(
        f"[U+{ord(ch):04X}]" if unicodedata.category(ch)[0] in "CZ" and ch != " " else ch
        for ch in text[:_SPAN_LIMIT]
    )
    if len(text) > _SPAN_LIMIT:
        shown += "…"
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith(("`", " ")) or shown.endswith(("`", " ")) else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def reason_markup(reason: str) -> Markup:
    """A refusal reason for the reply: its code spans kept as code, everything else escaped as
    user text (one line, no markup, no mention, no command)."""
    parts: list[str] = []
    at = 0
    for found in _CODE_SPAN.finditer(reason):
        parts.append(_text(reason[at : found.start()]))
        inner = found.group(2)
        if len(inner) > 2 and inner[0] == inner[-1] == " " and inner.strip():
            inner = inner[1:-1]  # CommonMark strips one space on each side
        parts.append(code_span(inner))
        at = found.end()
    parts.append(_text(reason[at:]))
    return Markup("".join(parts).strip())


def _text(part: str) -> str:
    """Text between code spans, escaped, keeping the spaces that separate it from them."""
    if not part.strip():
        return " " if part else ""
    before = " " if part[0].isspace() else ""
    after = " " if part[-1].isspace() else ""
    return before + md_escape(part, limit=len(part) + 1) + after


def acknowledge(
    services: Services,
    project: Project,
    mr: MrRef,
    note_id: int,
    command: Command,
    result: CommandVerdict,
    *,
    rules: Rules,
    bot_username: str,
    commenter: Commenter,
) -> None:
    """Reacts on the note; replies (refusal, help) only when this run's reaction was new and the
    commenter's reply window (GITOPS_REPLY_WINDOW) on this MR is open."""
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
        ensure_inert(body)
    except ValueError as exc:  # a bug in the escaping: never post it
        REPLIES.labels("not_inert").inc()
        log.error("reply not posted: %s", exc, extra=extra)
        return
    if not claim_reply(
        services.engine,
        project_id=mr.project_id,
        mr_iid=mr.iid,
        user_id=commenter.user_id,
        window=services.settings.reply_window,
    ):
        REPLIES.labels("held_back").inc()
        log.info("reply held back: one per user and MR per window", extra=extra)
        return
    try:
        post_json(
            project.gl,
            f"{project.mr_path(mr.iid)}/notes",
            what=f"reply to comment {note_id} on !{mr.iid}",
            data={"body": body},
        )
    except GitLabError as exc:
        REPLIES.labels("failed").inc()
        log.warning("could not reply to the command: %s", short(exc), extra=extra)
        return
    REPLIES.labels("posted").inc()


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
        "reason": reason_markup(reason) if reason else None,
        "show_help": show_help,
        "commands": rows,
        "mention": mention,
    }
    return get_template(REPLY_TEMPLATE).render(**context)
