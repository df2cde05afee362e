"""Builders for MR command tests: people with roles, a person's MR, notes typed and delivered.

Everything goes through the in-process `Bot` (tests/workflow/harness.py): a note is stored on the
GitLab double, its Note Hook is posted to `/webhooks/gitlab` with the webhook secret, and
`bot.settle()` runs the jobs that follow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import fakeredis
import responses
from redis import Redis
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.models import AUDIT, OPERATIONS
from jobs.outbox import dispatch
from sim.gitlab import Access, Note
from tests.builders import operation
from tests.conftest import REDIS_URL
from tests.workflow.harness import PROJECT, SECRETS, Bot

#: The roles of the matrix: username -> access level on PROJECT (0: not a member).
#: alice writes the MRs (a Developer, as anyone pushing a branch in the project is).
PEOPLE: dict[str, int] = {
    "alice": Access.DEVELOPER,
    "maria": Access.MAINTAINER,
    "dave": Access.DEVELOPER,
    "rita": Access.REPORTER,
    "gus": Access.GUEST,
    "nora": 0,
}
AUTHOR = "alice"
BOT = "gitops-bot"


@contextmanager
def running_bot(db: Engine, **settings: Any) -> Iterator[Bot]:
    """The bot with its doubles (Redis db of GITOPS_TEST_REDIS_URL, else fakeredis) and PEOPLE;
    `settings` override the harness's Settings."""
    redis: Redis = Redis.from_url(REDIS_URL) if REDIS_URL else fakeredis.FakeRedis()
    redis.flushdb()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        bot = Bot(db, redis, rsps, **settings)
        add_people(bot)
        try:
            yield bot
        finally:
            bot.close()
            redis.flushdb()


def add_people(bot: Bot) -> None:
    """Adds every person of PEOPLE with their access level on the project."""
    for name, level in PEOPLE.items():
        bot.gitlab.add_user(name, access={PROJECT: level} if level else {})


def person_mr(
    bot: Bot,
    branch: str = "feature",
    *,
    author: str = AUTHOR,
    files: dict[str, str | None] | None = None,
    title: str = "Scale service-a to 3",
) -> int:
    """A person's MR on the project (by default changing config/prod.yaml); its iid."""
    changes = files if files is not None else {"config/prod.yaml": "replicas: 3\n"}
    mr = bot.gitlab.open_mr(PROJECT, branch, author=author, files=changes, title=title)
    return mr.iid


def deliver(bot: Bot, iid: int, note_id: int, **kw: Any) -> int:
    """Posts the note's Note Hook (fresh Idempotency-Key); the HTTP status the bot answered."""
    headers, body = bot.gitlab.webhook(
        "note", project=PROJECT, iid=iid, note_id=note_id, token=SECRETS["webhook"], **kw
    )
    return bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code


def deliver_forged(
    bot: Bot,
    iid: int,
    note_id: int | None,
    forge: Callable[[dict[str, Any]], None],
    *,
    project: str = PROJECT,
    **kw: Any,
) -> int:
    """Posts a Note Hook (with the right secret) whose payload `forge` rewrote; the HTTP status.
    Without `note_id` the hook names a note GitLab does not hold."""
    headers, body = bot.gitlab.webhook(
        "note", project=project, iid=iid, note_id=note_id, token=SECRETS["webhook"], **kw
    )
    payload = json.loads(body)
    forge(payload)
    data = json.dumps(payload).encode()
    return bot.client.post("/webhooks/gitlab", data=data, headers=headers).status_code


def say(bot: Bot, user: str, body: str, iid: int, *, settle: bool = True) -> Note:
    """`user` comments `body` on MR !iid; the hook is delivered and the jobs run."""
    note = bot.gitlab.add_note(PROJECT, iid, user, body)
    assert deliver(bot, iid, note.id) < 300
    if settle:
        bot.settle()
    return note


def awards(bot: Bot, iid: int, note_id: int) -> list[str]:
    """The emoji names awarded on a note."""
    return [a.name for a in bot.gitlab.mr(PROJECT, iid).notes[note_id].awards]


def bot_notes(bot: Bot, iid: int) -> list[str]:
    """Bodies of the bot's own notes on the MR (replies and status comments)."""
    me = bot.gitlab.user(BOT).id
    return [n.body for n in bot.gitlab.mr(PROJECT, iid).notes.values() if n.author_id == me]


def replies(bot: Bot, iid: int) -> list[str]:
    """The bot's replies to commands on the MR (not its status comment)."""
    return [b for b in bot_notes(bot, iid) if "gitops-bot:reply:" in b]


def operations_of(bot: Bot, iid: int) -> list[dict[str, Any]]:
    """Operations carrying MR !iid, oldest first."""
    with bot.services.engine.connect() as conn:
        rows = conn.execute(
            select(OPERATIONS).where(OPERATIONS.c.mr_iid == iid).order_by(OPERATIONS.c.created_at)
        ).all()
    return [dict(r._mapping) for r in rows]


def audit_rows(bot: Bot, correlation_id: str | None = None) -> list[dict[str, Any]]:
    """Audit rows (those of one correlation id when given), oldest first."""
    query = select(AUDIT).order_by(AUDIT.c.id)
    if correlation_id is not None:
        query = query.where(AUDIT.c.correlation_id == correlation_id)
    with bot.services.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def carry(bot: Bot, iid: int, **kw: Any) -> str:
    """Registers MR !iid as `/gitops apply` would (without a command) and drives it once."""
    mr = bot.gitlab.mr(PROJECT, iid)
    return bot.request(
        Flow.MR_FIRST,
        subject_id=f"{PROJECT}!{iid}",
        target_key=f"{PROJECT}:{mr.target_branch}",
        title=mr.title,
        files=[],
        mr_iid=iid,
        **kw,
    )


def to_validated(bot: Bot, op_id: str) -> None:
    """Carries an MR-first operation whose MR exists through checks, approval, merge, deploy."""
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    assert bot.approve(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.MERGED
    assert bot.deployed(op_id) == 202
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED


def flush_outbox(bot: Bot) -> None:
    """Runs the outbox dispatcher (status comments, labels, closes, withdrawals) now."""
    dispatch()


def mr_iid_of(bot: Bot, op_id: str) -> int:
    """The MR iid an operation carries."""
    iid = operation(bot.services.engine, op_id)["mr_iid"]
    assert isinstance(iid, int)
    return iid
