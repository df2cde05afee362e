"""`gitops-bot policy`: check a repository's policy file locally or in its own CI, print the
published JSON Schema. It runs anywhere the bot is installed: the file is held to the server's
values (a policy file only tightens them) read from the environment's GITOPS_* settings and, when
GITOPS_DATABASE_URL is set and answers, the flags in that database; else the flags' defaults
(the first line printed says which)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from bot.app.policy import limits_from, parse_checked
from bot.config import Settings
from bot.policy import MAX_POLICY_BYTES, POLICY_PATH, Policy, PolicyError
from bot.policy import policy_schema as schema_text
from bot.policy.tighten import Limits
from bot.store.flags import DEFAULTS, FlagsUnreadable, stored_flags


def summary(policy: Policy) -> str:
    """What a valid file sets, in one line (the rest comes from the environment)."""
    data = policy.to_json()
    data.pop("version", None)
    sections = ", ".join(sorted(data)) or "nothing (the environment's settings apply)"
    return f"ok: version {policy.version}; sets {sections}"


def server_limits(env: Mapping[str, str] | None = None) -> tuple[Limits, str]:
    """The server's values the file is held to, and a line saying where they come from."""
    env = os.environ if env is None else env
    settings = Settings.from_env(env)
    if not env.get("GITOPS_DATABASE_URL", "").strip():
        return limits_from(settings, DEFAULTS), "held to GITOPS_* and the flags' defaults"
    try:
        flags = stored_flags(settings.database_url)
    except FlagsUnreadable as exc:
        return limits_from(settings, DEFAULTS), f"held to GITOPS_* and the flags' defaults ({exc})"
    return limits_from(settings, flags), "held to GITOPS_* and the flags in GITOPS_DATABASE_URL"


def check_file(path: str, limits: Limits, source: str = "") -> tuple[int, list[str]]:
    """The exit status and the lines `policy check` prints for the file at `path`."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        return 1, [f"{path}:1:1: cannot read: {exc.strerror or exc}"]
    try:
        policy = parse_checked(raw, path, limits)  # the schema, and never loosening the server
    except PolicyError as exc:
        return 1, [str(problem) for problem in exc.problems]
    return 0, [f"{path}: {summary(policy)}" + (f" ({source})" if source else "")]


@click.group()
def policy() -> None:
    """The repository policy file (.gitops/bot.yml)."""


@policy.command()
@click.argument("file", default=POLICY_PATH, required=False)
def check(file: str) -> None:
    """Validate a policy file: `file:line:col: message` per problem and exit 1, or "ok"."""
    try:
        limits, source = server_limits()
    except ValueError as exc:  # a malformed GITOPS_* setting
        raise click.ClickException(str(exc)) from None
    status, lines = check_file(file, limits, source)
    for line in lines:
        click.echo(line, err=status != 0)
    sys.exit(status)


@policy.command("schema")
def schema() -> None:
    """Print the policy file's JSON Schema (docs/policy.schema.json)."""
    click.echo(schema_text(), nl=False)
