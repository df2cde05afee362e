"""1,000 generated requester texts through the REST API: nothing the bot writes to GitLab is live.

Each case is a change submitted with `POST /api/v1/changes` (MR-first, so the bot opens the MR
at once) whose title, description and requester mix a corpus of hostile pieces (quick actions at
every kind of line start, mass and group mentions, fences, HTML comments, bidi and zero-width
characters, emoji, long lines) with random text; on every tenth MR a person then types a
command carrying such text. After the jobs and the outbox ran, every text the bot wrote to the
GitLab double (branch names, commit messages, MR titles and descriptions, every version of every
status comment, its replies) is checked by an oracle written here, independent of bot code.
"""

from __future__ import annotations

import html
import logging
import os
import random
import re
import time
import unicodedata
from dataclasses import dataclass, field

from bot.core.states import Flow
from bot.store.flags import set_flag
from bot.store.outbox import pending_count
from jobs.outbox import dispatch
from tests.commands import BOT, PEOPLE, add_people, deliver
from tests.workflow.harness import PROJECT, Bot

log = logging.getLogger(__name__)

#: Generated changes: 1,000 on the embedded pass; the PostgreSQL pass, slower per change, runs
#: the first 200 of them again there; GITOPS_INERT_CASES runs more (or fewer).
CASES = int(
    os.environ.get(
        "GITOPS_INERT_CASES", "200" if os.environ.get("GITOPS_TEST_DATABASE_URL") else "1000"
    )
)
SEED = 12
#: Changes submitted before the jobs and the outbox run once for all of them.
BATCH = 250
#: A person types a command with hostile text on every this-many-th MR.
COMMAND_EVERY = 10

# -- the oracle ----------------------------------------------------------------------------------

#: Every line break a GitLab component (Ruby, browsers, Markdown) might honour.
_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: An `@` that could start a mention (`@all`, `@user`, `@group/sub`, `@_x`, `@.x`).
_MENTION = re.compile(r"@(?=[\w.])")
#: Leading blockquote markers (any depth) and what follows them.
_QUOTES = re.compile(r"^((?: {0,3}>[ ]?)*)(.*)$", re.DOTALL)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def _forbidden_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return (category == "Cc" and ch != "\n") or category in ("Cf", "Zl", "Zp")


def outside_code(text: str) -> str:
    """The Markdown's text outside fenced code blocks and code spans (quotes looked into)."""
    kept: list[str] = []
    fence: tuple[str, int, int] | None = None  # (fence char, length, quote depth)
    for line in text.split("\n"):
        markers, rest = _QUOTES.match(line).groups()  # type: ignore[union-attr]
        depth = markers.count(">")
        if fence is not None:
            if depth < fence[2]:
                fence = None  # the quote holding the fence ended: so did the fence
            else:
                match = _FENCE.match(rest)
                closing = match is not None and not match.group(2).strip()
                if closing and match is not None:
                    run = match.group(1)
                    if run[0] == fence[0] and len(run) >= fence[1]:
                        fence = None
                continue
        match = _FENCE.match(rest)
        if match is not None and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence = (match.group(1)[0], len(match.group(1)), depth)
            continue
        kept.append(_CODE_SPAN.sub(" ", rest))
    return "\n".join(kept)


def violations(text: str, *, markdown: bool) -> list[str]:
    """What makes `text` live in GitLab; empty when it is inert."""
    found = [
        f"U+{ord(ch):04X} ({unicodedata.name(ch, '?')})"
        for ch in sorted(set(text))
        if _forbidden_char(ch)
    ]
    found += [
        f"quick action line {line[:60]!r}"
        for line in _BREAKS.split(text)
        if line.lstrip().startswith("/")
    ]
    # Markdown turns entities and backslash escapes into text before GitLab finds references
    live = html.unescape(outside_code(text)) if markdown else text
    found += [f"mention {live[m.start() : m.start() + 20]!r}" for m in _MENTION.finditer(live)]
    return found


def test_oracle_catches_each_kind_of_live_text() -> None:
    """The oracle flags a quick action, a mention and a bidi mark; fenced, quoted code passes."""
    assert violations("ok\n  /label ~x", markdown=True)
    assert violations("ok\r/merge", markdown=False)
    assert violations("hi @all", markdown=True)
    assert violations("hi &#64;all", markdown=True)
    assert violations("abc\u202edef", markdown=False)
    assert violations("> ```\n> x\nplain @all", markdown=True)  # the quote ended the fence
    assert violations("> ```\n> x\n> ```\n@all", markdown=True)
    assert not violations("> ````text\n> /close @all ```\n> ````\n`@all` x", markdown=True)
    assert not violations("Title \uff20all", markdown=False)


# -- the generator -------------------------------------------------------------------------------

NASTY = [
    "/label ~x",
    " /target_branch main",
    "\r/merge",
    "\u2028/close",
    "\u2029/approve",
    "\r\n/assign_reviewer @alice",
    "\n/unassign",
    "\t/lock",
    "    /merge",
    "> /approve",
    "/gitops apply",
    "@all",
    "@group/sub",
    "(@all)",
    "/@all",
    "x@all",
    "@_x",
    "@.x",
    "`@all`",
    "```",
    "````",
    "~~~",
    "\n```\n",
    "\n~~~\n/close\n~~~\n",
    "<!-- -->",
    "-->",
    "<!-- gitops-bot:status:00000000-0000-4000-8000-000000000000 -->",
    ">>>",
    "\n>>>\n/close\n>>>\n",
    "\u202e",
    "\u2066",
    "\u2069",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u00ad",
    "\u061c",
    "\U000e0041",
    "\u200b/close",
    "\u202e/close",
    "🚀",
    "👨\u200d👩\u200d👧",
    "&#64;all",
    "&commat;all",
    "\\@all",
    "#12",
    "!3",
    "~bug",
    "[x](http://e.vil)",
    "<script>alert(1)</script>",
    "**bold**",
    "| a | b |",
    "\u3000/close",
    "\u00a0/close",
]
WORDS = ["scale", "replicas", "to", "3", "prod", "config", "the", "é", "ß", "東京", "Δ", "ok"]
REQUESTERS = [
    "alice",
    "eve/@all",
    "x@all",
    "mallory/@group/sub",
    "bob@example.com",
    "a:/label",
    "u~x",
    "b!1",
    "c+@_x",
]


def _piece(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(NASTY)
    if roll < 0.9:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
    if roll < 0.95:
        return rng.choice(WORDS) * rng.randint(50, 400)  # a long line
    return "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 12)))


def _joined(rng: random.Random, pieces: int) -> str:
    seps = ["", " ", "\n", "\r\n", "\n\n"]
    return "".join(_piece(rng) + rng.choice(seps) for _ in range(pieces))


def _title(rng: random.Random) -> str:
    """A title the API accepts: at most 255 characters, no control character, not blank."""
    raw = _joined(rng, rng.randint(1, 5))
    text = "".join(ch for ch in raw if unicodedata.category(ch) != "Cc")
    return (text[:240] + " t") if text.strip() else "/close @all"


def _description(rng: random.Random) -> str:
    """A description the API accepts: controls only tab, newline and carriage return."""
    raw = _joined(rng, rng.randint(0, 30))
    return "".join(ch for ch in raw if unicodedata.category(ch) != "Cc" or ch in "\t\n\r")


# -- the run -------------------------------------------------------------------------------------


@dataclass
class Written:
    """Every text the bot sent to GitLab, by kind."""

    texts: list[tuple[str, str, bool]] = field(default_factory=list)  # (kind, text, markdown)

    def add(self, kind: str, text: object, *, markdown: bool) -> None:
        if isinstance(text, str):
            self.texts.append((kind, text, markdown))


def _written(bot: Bot) -> Written:
    """The bot's writes, from its recorded calls and from the double's final state."""
    out = Written()
    me = bot.gitlab.user(BOT).id
    for call in bot.gitlab.calls:
        if call.user != BOT or call.method not in ("POST", "PUT"):
            continue
        if not isinstance(call.body, dict):
            continue
        body = call.body
        out.add("commit message", body.get("commit_message"), markdown=False)
        out.add("branch", body.get("branch"), markdown=False)
        out.add("branch", body.get("source_branch"), markdown=False)
        out.add("MR title", body.get("title"), markdown=False)
        out.add("MR description", body.get("description"), markdown=True)
        out.add("note", body.get("body"), markdown=True)
    project = bot.gitlab.project(PROJECT)
    for mr in project.mrs.values():
        out.add("MR title", mr.title, markdown=False)
        out.add("MR description", mr.description, markdown=True)
        out.add("branch", mr.source_branch, markdown=False)
        for note in mr.notes.values():
            if note.author_id == me:
                out.add("note", note.body, markdown=True)
    for commit in bot.gitlab.state.commits.values():
        if commit.author_id == me:
            out.add("commit message", commit.message, markdown=False)
    return out


def _drain_outbox() -> None:
    while dispatch(limit=500).claimed:
        pass


def _comment_commands(bot: Bot, rng: random.Random) -> int:
    """People type commands carrying hostile text on every COMMAND_EVERY-th MR (the bot answers
    with the help, a refusal, or nothing); how many were typed."""
    typed = 0
    for iid in sorted(bot.gitlab.project(PROJECT).mrs)[::COMMAND_EVERY]:
        verb = rng.choice(["help", "retry", "cancel", "", "frobnicate"])
        text = _title(rng).replace("\n", " ")
        body = rng.choice([f"/gitops {verb} {text}", f"@{BOT} {verb} {text}", f"/gitops {text}"])
        note = bot.gitlab.add_note(PROJECT, iid, rng.choice(list(PEOPLE)), body)
        assert deliver(bot, iid, note.id) < 300
        typed += 1
    bot.settle()
    return typed


def test_no_text_the_bot_writes_is_live(bot: Bot) -> None:
    """1,000 hostile titles, descriptions and requesters: 0 quick actions, mentions or bidi."""
    started = time.monotonic()
    set_flag(bot.services.engine, "workflow.order", Flow.MR_FIRST)
    add_people(bot)
    rng = random.Random(SEED)
    headers = {"Authorization": f"Bearer {bot.settings.api_token}"}
    for first in range(0, CASES, BATCH):
        for n in range(first, min(first + BATCH, CASES)):
            body = {
                "subject_id": f"svc-{n}",
                "target_key": "config/prod.yaml",
                "project": PROJECT,
                "target_branch": "main",
                "title": _title(rng),
                "description": _description(rng),
                "requested_by": rng.choice(REQUESTERS),
                "files": [{"path": "config/prod.yaml", "content": f"replicas: {n}\n"}],
            }
            answer = bot.client.post("/api/v1/changes", json=body, headers=headers)
            assert answer.status_code == 202, answer.get_json()
        bot.settle()
        _drain_outbox()
    commands = _comment_commands(bot, rng)
    _drain_outbox()
    assert pending_count(bot.services.engine) == 0
    project = bot.gitlab.project(PROJECT)
    # every change got its MR and its status comment: nothing was refused at a write seam
    assert len(project.mrs) == CASES
    assert all(mr.notes for mr in project.mrs.values())
    notes = [note.body for mr in project.mrs.values() for note in mr.notes.values()]
    replies = sum("gitops-bot:reply:" in body for body in notes)
    assert replies > 0
    written = _written(bot)
    bad = [
        (kind, problem, text)
        for kind, text, markdown in written.texts
        for problem in violations(text, markdown=markdown)
    ]
    seconds = time.monotonic() - started
    by_kind: dict[str, int] = {}
    by_problem: dict[str, int] = {}
    for kind, problem, _ in bad:
        by_kind[kind] = by_kind.get(kind, 0) + 1
        what = problem.split(" ", 1)[0] if problem[0] != "U" else "hidden character"
        by_problem[what] = by_problem.get(what, 0) + 1
    live_texts = len({(kind, text) for kind, _, text in bad})
    # the figures (pytest --log-cli-level=INFO shows them)
    log.info(
        "inert fuzz: %d changes, %d commands (%d replies), %d writes checked, "
        "%d violations in %d distinct texts (by text %s, by problem %s), %.1f s",
        CASES,
        commands,
        replies,
        len(written.texts),
        len(bad),
        live_texts,
        by_kind,
        by_problem,
        seconds,
    )
    assert bad == [], f"{len(bad)} violations, e.g. {[(k, p, t[:200]) for k, p, t in bad[:5]]}"
