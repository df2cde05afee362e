"""The API clients' store (bot/store/clients.py) and migration 0013, on the suite's database."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.store.clients import (
    SHARED_CLIENT,
    ApiClient,
    ClientRefused,
    NotOnBehalf,
    Scope,
    authenticate,
    create_client,
    list_clients,
    revoke_client,
)
from bot.store.migrate import downgrade, upgrade
from bot.store.models import API_CLIENTS, OPERATIONS, utcnow
from bot.store.writeguard import StateWriteRefused
from tests.builders import make_operation


def test_only_the_tokens_hash_is_stored(db: Engine) -> None:
    """The row holds the token's SHA-256 and no trace of the token; tokens are random and long."""
    client, token = create_client(db, "ci", {Scope.READ})
    _, other = create_client(db, "ci-2", {Scope.READ})
    with db.connect() as conn:
        row = conn.execute(select(API_CLIENTS).where(API_CLIENTS.c.name == "ci")).one()
    assert token.startswith("gbc_")
    assert len(token) >= 40
    assert token != other
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in repr(tuple(row))
    assert token[4:] not in repr(tuple(row))
    assert client.name == "ci"
    assert client.scopes == {Scope.READ}


def test_last_use_is_written_at_most_once_a_minute(db: Engine) -> None:
    """Each request authenticates, but last_used_at moves only when a minute has passed."""
    _, token = create_client(db, "ci", {Scope.READ})
    start = utcnow()

    def last_used() -> object:
        return list_clients(db)[0].last_used_at

    assert authenticate(db, token, now=start) is not None
    assert last_used() == start
    assert authenticate(db, token, now=start + timedelta(seconds=30)) is not None
    assert last_used() == start
    later = start + timedelta(seconds=61)
    assert authenticate(db, token, now=later) is not None
    assert last_used() == later


def test_a_revoked_client_authenticates_no_more(db: Engine) -> None:
    """After revoke the token names nobody; the list shows when it was revoked."""
    _, token = create_client(db, "old", {Scope.ADMIN})
    revoked = revoke_client(db, "old")
    assert revoked.revoked
    assert authenticate(db, token) is None
    assert list_clients(db)[0].revoked_at == revoked.revoked_at
    assert revoke_client(db, "old").revoked_at == revoked.revoked_at  # stays as it was
    with pytest.raises(ClientRefused, match="no client is named"):
        revoke_client(db, "ghost")


@pytest.mark.parametrize(
    ("name", "scopes", "projects", "words"),
    [
        ("has space", {Scope.READ}, [], "not a client name"),
        ("-dash", {Scope.READ}, [], "not a client name"),
        ("x" * 65, {Scope.READ}, [], "not a client name"),
        ("gitops_api_token", {Scope.READ}, [], "shared token"),
        ("ci", set(), [], "at least one scope"),
        ("ci", {Scope.READ}, ["group/app,other"], "not a project"),
        ("ci", {Scope.READ}, [" "], "not a project"),
    ],
)
def test_bad_clients_are_refused_with_a_reason(
    db: Engine, name: str, scopes: set[Scope], projects: list[str], words: str
) -> None:
    """A bad name, no scope or a bad project is refused saying so; nothing is stored."""
    with pytest.raises(ClientRefused, match=words):
        create_client(db, name, scopes, projects=projects)
    assert list_clients(db) == []


def test_a_name_is_taken_once(db: Engine) -> None:
    """A second client of the same name is refused; the first keeps its token."""
    _, token = create_client(db, "ci", {Scope.READ})
    with pytest.raises(ClientRefused, match="exists already"):
        create_client(db, "ci", {Scope.ADMIN})
    found = authenticate(db, token)
    assert found is not None
    assert found.scopes == {Scope.READ}


def test_the_shared_token_is_compared_whole(db: Engine) -> None:
    """GITOPS_API_TOKEN names the admin client; a prefix or an empty setting names nobody."""
    assert authenticate(db, "s3cret", "s3cret") == SHARED_CLIENT
    assert authenticate(db, "s3cre", "s3cret") is None
    assert authenticate(db, "", "") is None
    assert authenticate(db, "anything", "") is None


def test_who_a_client_acts_as() -> None:
    """An ordinary client is its own applicant; an on-behalf one names users, and the audit
    actor always keeps the client's whole name."""
    ordinary = ApiClient("ci", frozenset({Scope.SUBMIT}))
    portal = ApiClient("portal", frozenset({Scope.SUBMIT}), on_behalf=True)
    assert ordinary.applicant(None) == ordinary.applicant("ci") == "ci"
    with pytest.raises(NotOnBehalf):
        ordinary.applicant("alice")
    assert portal.applicant("alice") == "alice"
    assert portal.actor("alice") == "alice via portal"
    long = portal.actor("a" * 255)
    assert len(long) == 255
    assert long.endswith(" via portal")
    assert ordinary.actor() == "ci"


def test_0013_keeps_the_state_and_audit_triggers(db: Engine) -> None:
    """Down to 0012 and up again: raw state writes and audit rewrites are still refused, and
    the new api_client column takes a plain write."""
    op_id = make_operation(db, S.MERGING)
    downgrade(db, "0012")
    upgrade(db)
    for sql in ("UPDATE bindings SET state = 'MERGED'", "DELETE FROM audit_log"):
        with pytest.raises(StateWriteRefused), db.begin() as conn:
            conn.execute(text(sql))
    with db.begin() as conn:
        conn.execute(update(OPERATIONS).values(api_client="ci"))
    with db.connect() as conn:
        assert conn.execute(select(OPERATIONS.c.api_client)).scalar_one() == "ci"
    assert op_id
