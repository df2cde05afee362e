"""`gitops-bot clients create|list|revoke`, and the startup warning while GITOPS_API_TOKEN is
set."""

from __future__ import annotations

import json
import logging
from typing import Any

import fakeredis
import pytest
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.store.clients import Scope, authenticate, list_clients
from gitops_bot import ops_clients, runner
from tests.cli import Run


def test_create_prints_the_token_once_and_keeps_only_its_hash(run: Run, db: Engine) -> None:
    """The token is the last line of stdout, works at once, and is in no later output."""
    created = run(
        "clients", "create", "ci-deploy", "--scope", "read", "--scope", "submit",
        "--project", "group/app", "--project", "42",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("gbc_")
    assert "ci-deploy" in created.stdout
    assert "group/app, 42" in created.stdout
    client = authenticate(db, token)
    assert client is not None
    assert (client.scopes, client.projects) == ({Scope.READ, Scope.SUBMIT}, ("group/app", "42"))

    listed = run("clients", "list")
    as_json = run("clients", "list", "--json")
    assert token not in listed.output
    assert token not in as_json.output
    assert token[4:] not in listed.output


def test_list_shows_scopes_projects_created_last_use_and_revoked(run: Run, db: Engine) -> None:
    """One line per client with its scopes, projects, creation, last use and revocation; the
    shared token is listed as the environment's."""
    token = run("clients", "create", "reader", "--scope", "read").stdout.splitlines()[-1]
    run("clients", "create", "portal", "--scope", "submit", "--on-behalf")
    authenticate(db, token)
    run("clients", "revoke", "portal")

    listed = run("clients", "list", GITOPS_API_TOKEN="old-shared")
    rows = {line.split()[0]: line for line in listed.output.splitlines()[1:]}

    assert listed.exit_code == 0
    assert listed.output.splitlines()[0].split()[:3] == ["NAME", "SCOPES", "PROJECTS"]
    assert set(rows) == {"reader", "portal", "GITOPS_API_TOKEN"}
    assert "read" in rows["reader"]
    assert "(all)" in rows["reader"]
    assert "never" not in rows["reader"]
    assert rows["portal"].split()[3] == "yes"
    assert rows["portal"].rstrip().endswith("UTC")
    assert "admin" in rows["GITOPS_API_TOKEN"]
    assert "(environment)" in rows["GITOPS_API_TOKEN"]
    data = json.loads(run("clients", "list", "--json").output)
    assert [(c["name"], c["revoked_at"] is not None) for c in data] == [
        ("portal", True),
        ("reader", False),
    ]


def test_revoke_ends_the_token_and_unknown_names_exit_1(run: Run, db: Engine) -> None:
    """Revoked, the token authenticates no more; an unknown name or the shared token's exits 1
    changing nothing."""
    token = run("clients", "create", "old", "--scope", "admin").stdout.splitlines()[-1]
    revoked = run("clients", "revoke", "old")
    assert revoked.exit_code == 0
    assert "revoked API client old" in revoked.output
    assert authenticate(db, token) is None
    ghost = run("clients", "revoke", "ghost")
    assert ghost.exit_code == 1
    assert "no client is named 'ghost'" in ghost.output
    shared = run("clients", "revoke", "GITOPS_API_TOKEN")
    assert shared.exit_code == 1
    assert "unset GITOPS_API_TOKEN" in shared.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["ci", "--scope", "root"], "'root' is not one of"),
        (["ci"], "Missing option '--scope'"),
        (["has space", "--scope", "read"], "not a client name"),
        (["GITOPS_API_TOKEN", "--scope", "read"], "shared token"),
    ],
)
def test_bad_create_exits_non_zero_saying_why(
    run: Run, db: Engine, args: list[str], words: str
) -> None:
    """A bad scope, no scope or a bad name is refused with the reason; nothing is stored."""
    refused = run("clients", "create", *args)
    assert refused.exit_code != 0
    assert words in refused.output
    assert list_clients(db) == []


def test_a_name_taken_already_exits_1(run: Run, db: Engine) -> None:
    """A second `create` of one name exits 1 and prints no token."""
    run("clients", "create", "ci", "--scope", "read")
    again = run("clients", "create", "ci", "--scope", "admin")
    assert again.exit_code == 1
    assert "exists already" in again.output
    assert "gbc_" not in again.output


@pytest.fixture
def no_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """web and serve stop before gunicorn runs or the schema is touched."""
    monkeypatch.setattr(runner, "_upgrade_schema", lambda settings: None)
    monkeypatch.setattr(runner._Gunicorn, "run", lambda self: None)
    monkeypatch.setattr("gitops_bot.wiring.make_redis", lambda settings: fakeredis.FakeRedis())


@pytest.mark.parametrize(
    "start",
    [
        lambda s: runner.web(s, host="127.0.0.1", port=0),
        lambda s: runner.serve(s, host="127.0.0.1", port=0),
    ],
    ids=["web", "serve"],
)
def test_the_shared_token_is_warned_about_at_startup(
    no_servers: None, caplog: pytest.LogCaptureFixture, start: Any
) -> None:
    """web and serve log one WARNING saying to create named clients while GITOPS_API_TOKEN is
    set, none when it is not."""
    caplog.set_level(logging.WARNING)
    start(Settings(api_token="old-shared", projects=("p",)))
    said = [r.getMessage() for r in caplog.records if r.name == ops_clients.__name__]
    caplog.clear()
    start(Settings(projects=("p",)))
    assert said == [ops_clients.SHARED_TOKEN_WARNING]
    assert "gitops-bot clients create" in said[0]
    assert [r for r in caplog.records if r.name == ops_clients.__name__] == []
