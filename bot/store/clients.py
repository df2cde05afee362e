"""Named clients of the REST API: who calls, with which scopes, on which projects.

Each client has its own token, shown once when it is created and stored only as its SHA-256 (a
random 256-bit token needs no slow hash; it is found by its hash). A client has scopes (`read`,
`submit`, `operate`, `admin`; admin satisfies every scope), optionally the projects it may act on
(paths or numeric ids, compared as GITOPS_PROJECTS is: bot/core/managed.py), and may be allowed
to state `requested_by` for the users it speaks for (`on_behalf`). The old single token,
GITOPS_API_TOKEN, keeps working as one admin client that may speak for users; it is not stored.

The CLI (`gitops-bot clients create|list|revoke`) and the web app (webhooks/api_auth.py) come
here; nothing else writes the table.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, func, insert, or_, select, update
from sqlalchemy.engine import Engine, RowMapping
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from bot.core.managed import is_managed
from bot.store.models import API_CLIENTS, OPERATIONS, utcnow

log = logging.getLogger(__name__)


class Scope(StrEnum):
    """What a client may do: read changes and queues, submit, operate (retry, cancel), admin
    (promote, and every other scope)."""

    READ = "read"
    SUBMIT = "submit"
    OPERATE = "operate"
    ADMIN = "admin"


#: Every token starts so (a secret scanner can find a leaked one).
TOKEN_PREFIX = "gbc_"
#: last_used_at is written at most once a minute per client, not on every request.
TOUCH_SECONDS = 60
#: A client's name: it becomes `requested_by`, so it obeys the API's id rules, shorter.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: The name GITOPS_API_TOKEN acts under (reserved: no stored client may take it).
SHARED_NAME = "GITOPS_API_TOKEN"
#: The audit log's actor column width.
ACTOR_LENGTH = 255
_PROJECT = re.compile(r"[^\s,]{1,255}")
_SCOPE_NAMES = frozenset(s.value for s in Scope)


class ClientRefused(ValueError):
    """A client cannot be created or revoked as asked; the message says why."""


class NotOnBehalf(ValueError):
    """The client stated a `requested_by` other than itself without being allowed to."""


@dataclass(frozen=True, slots=True)
class ApiClient:
    """One client of the REST API, as stored (never its token)."""

    name: str
    scopes: frozenset[Scope]
    projects: tuple[str, ...] = ()
    on_behalf: bool = False
    created_at: datetime | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None
    #: GITOPS_API_TOKEN, kept working as one admin client (not in the table)
    shared: bool = False

    def allows(self, scope: Scope) -> bool:
        """Whether the client holds `scope` (admin holds every scope)."""
        return scope in self.scopes or Scope.ADMIN in self.scopes

    def may_act_on(self, project: str | None, project_id: int | None = None) -> bool:
        """Whether a change in this project (path, numeric id or both) is the client's to see
        and act on; every project when the client names none."""
        return is_managed(self.projects, project_id=project_id, path=project)

    def applicant(self, stated: str | None) -> str:
        """Who requests a change it submits: the client itself, or the user it states when it
        may speak for users. Raises NotOnBehalf for a stated user it may not speak for."""
        if stated is None or stated == self.name:
            return self.name
        if not self.on_behalf:
            raise NotOnBehalf(
                f"this client ({self.name}) requests changes as itself: leave requested_by out "
                f"or give {self.name!r} (a client created with --on-behalf may name users)"
            )
        return stated

    def actor(self, requested_by: str | None = None) -> str:
        """The audit log's actor for what this client does: its name, or `<user> via <client>`
        when it speaks for a user (the client's name is always whole)."""
        if requested_by is None or requested_by == self.name:
            return self.name
        suffix = f" via {self.name}"
        return requested_by[: ACTOR_LENGTH - len(suffix)] + suffix

    @property
    def revoked(self) -> bool:
        """Whether its token no longer works."""
        return self.revoked_at is not None

    def as_json(self) -> dict[str, Any]:
        """The client for `clients list --json` (never a token or its hash)."""
        return {
            "name": self.name,
            "scopes": sorted(s.value for s in self.scopes),
            "projects": list(self.projects),
            "on_behalf": self.on_behalf,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "shared": self.shared,
        }


#: GITOPS_API_TOKEN as a client: admin, every project, may state requested_by (as before).
SHARED_CLIENT = ApiClient(SHARED_NAME, frozenset({Scope.ADMIN}), on_behalf=True, shared=True)


def new_token() -> str:
    """A fresh token: the prefix and 32 random bytes, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What is stored of a token, and what it is found by: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _client(row: RowMapping) -> ApiClient:
    return ApiClient(
        name=row["name"],
        scopes=frozenset(Scope(s) for s in row["scopes"] if s in _SCOPE_NAMES),
        projects=tuple(row["projects"] or ()),
        on_behalf=bool(row["on_behalf"]),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )


def _checked(name: str, scopes: Collection[Scope], projects: Iterable[str]) -> tuple[str, ...]:
    """The projects as stored, or ClientRefused naming what is wrong with the request."""
    if not NAME_PATTERN.fullmatch(name):
        raise ClientRefused(
            f"{name!r} is not a client name: 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    if name.casefold() == SHARED_NAME.casefold():
        raise ClientRefused(f"{SHARED_NAME} is the name the shared token acts under")
    if not scopes:
        raise ClientRefused("give at least one scope: " + ", ".join(s.value for s in Scope))
    kept: list[str] = []
    for project in projects:
        entry = project.strip().strip("/")
        if not _PROJECT.fullmatch(entry):
            raise ClientRefused(f"{project!r} is not a project path or numeric id")
        if entry not in kept:
            kept.append(entry)
    return tuple(kept)


def create_client(
    engine: Engine,
    name: str,
    scopes: Collection[Scope],
    *,
    projects: Iterable[str] = (),
    on_behalf: bool = False,
    now: datetime | None = None,
) -> tuple[ApiClient, str]:
    """Records a new client; it and its token, which exists nowhere else from now on. Raises
    ClientRefused for a bad name, no scope, a bad project or a name already taken."""
    kept = _checked(name, scopes, projects)
    token = new_token()
    when = now or utcnow()
    values = {
        "name": name,
        "token_hash": token_hash(token),
        "scopes": sorted(s.value for s in scopes),
        "projects": list(kept),
        "on_behalf": on_behalf,
        "created_at": when,
    }
    try:
        with engine.begin() as conn:
            conn.execute(insert(API_CLIENTS).values(values))
    except IntegrityError:
        raise ClientRefused(f"a client named {name!r} exists already") from None
    client = ApiClient(name, frozenset(scopes), kept, on_behalf, created_at=when)
    return client, token


def revoke_client(engine: Engine, name: str, *, now: datetime | None = None) -> ApiClient:
    """Ends the client's token (at once, for every process); the client as it is now. A client
    revoked already stays as it was. Raises ClientRefused for an unknown name."""
    with engine.begin() as conn:
        conn.execute(
            update(API_CLIENTS)
            .where(API_CLIENTS.c.name == name, API_CLIENTS.c.revoked_at.is_(None))
            .values(revoked_at=now or utcnow())
        )
        row = conn.execute(select(API_CLIENTS).where(API_CLIENTS.c.name == name)).one_or_none()
    if row is None:
        raise ClientRefused(f"no client is named {name!r}")
    return _client(row._mapping)


def list_clients(engine: Engine) -> list[ApiClient]:
    """Every stored client, by name."""
    with engine.connect() as conn:
        rows = conn.execute(select(API_CLIENTS).order_by(API_CLIENTS.c.name)).all()
    return [_client(row._mapping) for row in rows]


def authenticate(
    engine: Engine, token: str | None, shared_token: str = "", *, now: datetime | None = None
) -> ApiClient | None:
    """The client a bearer token belongs to: the shared GITOPS_API_TOKEN (compared in constant
    time) or a stored client's, not revoked; None for any other token. Notes the client's use
    at most once a minute."""
    if not token:
        return None
    given = token.encode("utf-8", "surrogateescape")
    if shared_token and hmac.compare_digest(given, shared_token.encode("utf-8")):
        return SHARED_CLIENT
    if not token.startswith(TOKEN_PREFIX):
        return None
    with engine.connect() as conn:
        row = conn.execute(
            select(API_CLIENTS).where(API_CLIENTS.c.token_hash == hashlib.sha256(given).hexdigest())
        ).one_or_none()
    if row is None or row.revoked_at is not None:
        return None
    client = _client(row._mapping)
    _touch(engine, row.id, client.last_used_at, now or utcnow())
    return client


def _touch(engine: Engine, row_id: int, last: datetime | None, now: datetime) -> None:
    """Writes last_used_at when the last write is a minute old (one process wins the race); a
    database too busy to take it does not refuse the request."""
    since = now - timedelta(seconds=TOUCH_SECONDS)
    if last is not None and last > since:
        return
    try:
        with engine.begin() as conn:
            conn.execute(
                update(API_CLIENTS)
                .where(
                    API_CLIENTS.c.id == row_id,
                    or_(API_CLIENTS.c.last_used_at.is_(None), API_CLIENTS.c.last_used_at <= since),
                )
                .values(last_used_at=now)
            )
    except SQLAlchemyError as exc:
        log.warning("could not note an API client's use: %s", type(exc).__name__)


# -- which changes a client may see ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChangeOwner:
    """Whose a change is: its project (as requested, and GitLab's id once known) and the API
    client that submitted it."""

    project: str
    project_id: int | None
    api_client: str | None


def change_owner(engine: Engine, operation_id: str) -> ChangeOwner | None:
    """The change's project and submitting client; None for an unknown id."""
    ops = OPERATIONS
    with engine.connect() as conn:
        row = conn.execute(
            select(ops.c.project, ops.c.project_id, ops.c.api_client).where(
                ops.c.id == operation_id
            )
        ).one_or_none()
    return None if row is None else ChangeOwner(row.project, row.project_id, row.api_client)


def owners(engine: Engine, operation_ids: Collection[str]) -> dict[str, ChangeOwner]:
    """change_owner() of several changes in one query."""
    if not operation_ids:
        return {}
    ops = OPERATIONS
    with engine.connect() as conn:
        rows = conn.execute(
            select(ops.c.id, ops.c.project, ops.c.project_id, ops.c.api_client).where(
                ops.c.id.in_(list(operation_ids))
            )
        ).all()
    return {row.id: ChangeOwner(row.project, row.project_id, row.api_client) for row in rows}


def project_condition(projects: Collection[str]) -> ColumnElement[bool]:
    """SQL: the operation's project is one of `projects` (by path, any case, or numeric id), as
    `ApiClient.may_act_on` decides it."""
    folded = {p.strip().strip("/").casefold() for p in projects} - {""}
    ids = [int(p) for p in folded if p.isdigit()]
    paths = sorted(folded | {f"{p}/" for p in folded})
    return or_(func.lower(OPERATIONS.c.project).in_(paths), OPERATIONS.c.project_id.in_(ids))
