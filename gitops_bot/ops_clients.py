"""The operator's `clients`: the REST API's named clients, created (the token shown once),
listed and revoked, through bot/store/clients.py's use cases; and the startup warning while the
shared GITOPS_API_TOKEN is still set.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime

import click

from bot.config import Settings
from bot.store.clients import (
    SHARED_CLIENT,
    ApiClient,
    ClientRefused,
    Scope,
    create_client,
    list_clients,
    revoke_client,
)

log = logging.getLogger(__name__)

#: The startup warning of web and serve while GITOPS_API_TOKEN is set.
SHARED_TOKEN_WARNING = (
    "GITOPS_API_TOKEN is set: it acts as one admin client that may state requested_by for "
    "anyone; create a named client per caller (`gitops-bot clients create NAME --scope ...`) "
    "and then unset it"
)


def warn_if_shared_token(settings: Settings) -> bool:
    """Logs SHARED_TOKEN_WARNING once when GITOPS_API_TOKEN is set; True when it did."""
    if not settings.api_token:
        return False
    log.warning(SHARED_TOKEN_WARNING)
    return True


def _when(moment: datetime | None, never: str = "never") -> str:
    from webhooks.pages import utc  # the web app's modules only when a command needs them

    return never if moment is None else f"{utc(moment)} UTC"


def clients_text(clients: Sequence[ApiClient]) -> str:
    """The clients for people: name, scopes, projects, created, last use, revoked."""
    from gitops_bot import ops

    if not clients:
        return "no API clients (create one: gitops-bot clients create NAME --scope read)"
    rows = [
        [
            client.name,
            ",".join(sorted(s.value for s in client.scopes)),
            ",".join(client.projects) or "(all)",
            "yes" if client.on_behalf else "no",
            "(environment)" if client.shared else _when(client.created_at),
            "(not recorded)" if client.shared else _when(client.last_used_at),
            _when(client.revoked_at, "-"),
        ]
        for client in clients
    ]
    header = ["NAME", "SCOPES", "PROJECTS", "ON BEHALF", "CREATED", "LAST USED", "REVOKED"]
    return ops.table(header, rows)


@click.group("clients")
def clients() -> None:
    """The REST API's clients: each with its own token, scopes and (optionally) projects."""


@clients.command("create")
@click.argument("name")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    required=True,
    type=click.Choice([s.value for s in Scope]),
    help="read (changes, queues), submit, operate (retry, cancel), admin (promote, all); "
    "repeat for several.",
)
@click.option(
    "--project",
    "projects",
    multiple=True,
    help="Only this project (path or numeric id); repeat for several; default: every project.",
)
@click.option(
    "--on-behalf", is_flag=True, help="It may state requested_by for the users it speaks for."
)
def clients_create(
    name: str, scopes: tuple[str, ...], projects: tuple[str, ...], on_behalf: bool
) -> None:
    """Create a client and print its token, once: only its hash is kept."""
    from gitops_bot import ops

    with ops.connected(Settings.from_env()) as services:
        try:
            client, token = create_client(
                services.engine,
                name,
                {Scope(s) for s in scopes},
                projects=projects,
                on_behalf=on_behalf,
            )
        except ClientRefused as exc:
            raise ops.Refused(str(exc)) from None
    click.echo(
        f"created API client {client.name}: scopes {', '.join(sorted(scopes))}; projects "
        f"{', '.join(client.projects) or '(all)'}; on behalf of users: "
        f"{'yes' if client.on_behalf else 'no'}"
    )
    click.echo("its token, shown this once (only its hash is kept):", err=True)
    click.echo(token)


@clients.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def clients_list(as_json: bool) -> None:
    """Every client: name, scopes, projects, created, last use, revoked (never a token)."""
    from gitops_bot import ops

    settings = Settings.from_env()
    with ops.connected(settings) as services:
        found = list_clients(services.engine)
    if settings.api_token:
        found.append(SHARED_CLIENT)
    if as_json:
        click.echo(json.dumps([c.as_json() for c in found], indent=2))
    else:
        click.echo(clients_text(found))


@clients.command("revoke")
@click.argument("name")
def clients_revoke(name: str) -> None:
    """End a client's token at once (for every process); exit 1 for an unknown name."""
    from gitops_bot import ops

    if name == SHARED_CLIENT.name:
        raise ops.Refused(f"{name} is the environment's token: unset GITOPS_API_TOKEN instead")
    with ops.connected(Settings.from_env()) as services:
        try:
            client = revoke_client(services.engine, name)
        except ClientRefused as exc:
            raise ops.Refused(str(exc)) from None
    click.echo(f"revoked API client {client.name} ({_when(client.revoked_at)})")
