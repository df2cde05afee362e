"""Dynamic flags: read per use from the database, changed by the CLI and the admin API."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from bot.core.commands import ACCESS_NAMES, DEFAULT_AUTHOR_MAY, DEFAULT_MIN_ACCESS, Verb
from bot.core.states import Flow
from bot.store.models import FLAGS, utcnow

_flags = FLAGS

#: Every flag with its default and what it decides. Unknown keys are refused.
DEFAULTS: Mapping[str, Any] = {
    # which step order an API submission takes; /gitops apply is always mr_first
    "workflow.order": Flow.APPROVE_FIRST.value,
    # "python-gitlab" (the default) or "direct": the HTTP call that sends check items to
    # /approval_check_items, which is NOT a GitLab API (an approval gateway's): keep the default
    "approve.impl": "python-gitlab",
    # attempts per approval account before giving up (negative counts as 0)
    "approval.max_retries": 3,
    # pipeline polls: [[interval_seconds, polls], ...]; past the last tier the wait is pending
    "poll.pipeline_tiers": [[10, 6], [30, 10], [120, 25]],
    # rebase polls, same shape
    "poll.rebase_tiers": [[5, 6], [15, 10]],
    # a pipeline wait past its tiers (pending): the MR's head pipeline read again, same shape;
    # past the last tier only an event or an operator moves it (12 + 46 reads over 24 hours)
    "poll.pending_tiers": [[300, 12], [1800, 46]],
    # pipeline polls once GitLab's pipeline webhooks are known to reach the bot for
    # the MR (one arrived): the webhook moves the wait and polls are the fallback, every 2
    # minutes (30 of them, within GITOPS_PIPELINE_TIMEOUT)
    "poll.covered_tiers": [[300, 12]],
    # rebase polls once hooks are known to reach the bot for the MR: a rebase that succeeds is
    # seen at once by the MR event of its push; one that fails sends no event, so it is seen
    # by these looks (the first after 15 s)
    "poll.covered_rebase_tiers": [[15, 4], [60, 10]],
    # a merge GitLab is not ready for yet (checking, approvals syncing, CI still running)
    "poll.merge_tiers": [[10, 6], [30, 10], [120, 25]],
    # following an MR on GitLab's merge train (its MR event says when it merged)
    "poll.train_tiers": [[30, 20], [120, 25]],
    # times the sweep re-drives a stuck step before writing an explicit failure
    "sweep.retry_budget": 5,
    # queued jobs past which a new request is refused as overloaded
    "queue.max_length": 10_000,
    # projects whose deployment pipeline deploys in merge order: a callback for a later MR
    # there means an earlier MR's lost callback was deployed too (reconciliation's watermark)
    "reconcile.watermark_projects": [],
    # MR comment commands: the minimum GitLab access level per verb (0: anyone); verbs left out
    # keep their default
    "commands.min_access": {verb.value: level for verb, level in DEFAULT_MIN_ACCESS.items()},
    # MR comment commands the MR's author may run whatever their access level
    "commands.author_may": sorted(verb.value for verb in DEFAULT_AUTHOR_MAY),
}


class UnknownFlag(KeyError):
    """No such flag."""


def get_flag(conn: Connection | Engine, key: str) -> Any:
    """The flag's value, or its default when it was never set."""
    if key not in DEFAULTS:
        raise UnknownFlag(key)
    query = select(_flags.c.value).where(_flags.c.key == key)
    if isinstance(conn, Engine):
        with conn.connect() as c:
            value = c.execute(query).scalar_one_or_none()
    else:
        value = conn.execute(query).scalar_one_or_none()
    return DEFAULTS[key] if value is None else value


def all_flags(engine: Engine) -> dict[str, Any]:
    """Every flag with its current value (defaults filled in)."""
    with engine.connect() as conn:
        stored = {row.key: row.value for row in conn.execute(select(_flags.c.key, _flags.c.value))}
    return {key: stored.get(key, default) for key, default in DEFAULTS.items()}


class FlagsUnreadable(Exception):
    """The flags of a database could not be read (unreachable, not migrated); says which."""


def stored_flags(url: str) -> dict[str, Any]:
    """Every flag of the database at `url` (defaults filled in), read once and let go, for a
    command that opens no database otherwise; FlagsUnreadable naming the database and why."""
    from bot.store.engine import make_engine  # a command may run without any database

    engine = make_engine(url)
    try:
        return all_flags(engine)
    except SQLAlchemyError as exc:
        where = engine.url.render_as_string(hide_password=True)
        raise FlagsUnreadable(f"{where} could not be read: {type(exc).__name__}") from None
    finally:
        engine.dispose()


def flag_rows(engine: Engine) -> list[tuple[str, Any, datetime | None]]:
    """Every flag: (key, current value, when it was set; None while it has its default)."""
    with engine.connect() as conn:
        stored = {
            row.key: (row.value, row.updated_at)
            for row in conn.execute(
                select(_flags.c.key, _flags.c.value, _flags.c.updated_at).where(
                    _flags.c.key.in_(list(DEFAULTS))
                )
            )
        }
    return [(key, *stored.get(key, (default, None))) for key, default in DEFAULTS.items()]


def _tiers(value: Any) -> list[list[int]]:
    if (
        not isinstance(value, list)
        or not value
        or not all(
            isinstance(t, list) and len(t) == 2 and all(type(n) is int and n > 0 for n in t)
            for t in value
        )
    ):
        raise ValueError("expected [[interval_seconds, polls], ...] of positive integers")
    return value


def _integer(value: Any) -> int:
    if type(value) is not int:
        raise ValueError("expected an integer")
    return value


_VERBS = frozenset(verb.value for verb in Verb)


def _min_access(value: Any) -> dict[str, int]:
    if (
        not isinstance(value, dict)
        or not set(value) <= _VERBS
        or not all(type(level) is int and level in ACCESS_NAMES for level in value.values())
    ):
        levels = ", ".join(str(level) for level in ACCESS_NAMES)
        raise ValueError(
            f"expected {{verb: access level}} with verbs of {sorted(_VERBS)} and levels of {levels}"
        )
    return dict(value)


def _verbs(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v in _VERBS for v in value):
        raise ValueError(f"expected a list of verbs of {sorted(_VERBS)}")
    return sorted(set(value))


_CHECKS: dict[str, Any] = {
    "workflow.order": lambda v: Flow(v).value,
    "approve.impl": lambda v: (
        v if v in ("python-gitlab", "direct") else _bad("python-gitlab or direct")
    ),
    "approval.max_retries": _integer,
    "poll.pipeline_tiers": _tiers,
    "poll.rebase_tiers": _tiers,
    "poll.pending_tiers": _tiers,
    "poll.covered_tiers": _tiers,
    "poll.covered_rebase_tiers": _tiers,
    "poll.train_tiers": _tiers,
    "poll.merge_tiers": _tiers,
    "sweep.retry_budget": _integer,
    "queue.max_length": _integer,
    "reconcile.watermark_projects": lambda v: (
        v
        if isinstance(v, list) and all(isinstance(p, str) for p in v)
        else _bad("a list of project paths or ids")
    ),
    "commands.min_access": _min_access,
    "commands.author_may": _verbs,
}


def _bad(expected: str) -> Any:
    raise ValueError(f"expected {expected}")


def check_flag(key: str, value: Any) -> Any:
    """The value normalised, or ValueError saying what the flag expects."""
    if key not in DEFAULTS:
        raise UnknownFlag(key)
    try:
        return _CHECKS[key](value)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None


def set_flag(engine: Engine, key: str, value: Any, now: datetime | None = None) -> None:
    """Sets a flag (upsert); new requests and the next use see it, nothing restarts."""
    if key not in DEFAULTS:
        raise UnknownFlag(key)
    put_row(engine, key, check_flag(key, value), now or utcnow())


def put_row(engine: Engine, key: str, value: Any, now: datetime) -> None:
    """Upserts one `flags` row as it is given: a flag (set_flag checked it) or one of the
    status rows kept there under a key that is no flag (the hooks check, the last sweep)."""
    insert = pg_insert if engine.dialect.name == "postgresql" else sqlite_insert
    stmt = insert(_flags).values(key=key, value=value, updated_at=now)
    stmt = stmt.on_conflict_do_update(
        index_elements=[_flags.c.key], set_={"value": value, "updated_at": now}
    )
    with engine.begin() as conn:
        conn.execute(stmt)
