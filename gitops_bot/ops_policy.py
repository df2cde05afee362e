"""`gitops-bot policy`: check a repository's policy file locally or in its own CI, print the
published JSON Schema. Reads no settings and opens no database: it runs anywhere the bot is
installed."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bot.app.policy import parse_checked
from bot.policy import MAX_POLICY_BYTES, POLICY_PATH, Policy, PolicyError
from bot.policy import policy_schema as schema_text


def summary(policy: Policy) -> str:
    """What a valid file sets, in one line (the rest comes from the environment)."""
    data = policy.to_json()
    data.pop("version", None)
    sections = ", ".join(sorted(data)) or "nothing (the environment's settings apply)"
    return f"ok: version {policy.version}; sets {sections}"


def check_file(path: str) -> tuple[int, list[str]]:
    """The exit status and the lines `policy check` prints for the file at `path`."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        return 1, [f"{path}:1:1: cannot read: {exc.strerror or exc}"]
    try:
        policy = parse_checked(raw, filename=path)  # the schema, and never loosening the env
    except PolicyError as exc:
        return 1, [str(problem) for problem in exc.problems]
    return 0, [f"{path}: {summary(policy)}"]


@click.group()
def policy() -> None:
    """The repository policy file (.gitops/bot.yml)."""


@policy.command()
@click.argument("file", default=POLICY_PATH, required=False)
def check(file: str) -> None:
    """Validate a policy file: `file:line:col: message` per problem and exit 1, or "ok"."""
    status, lines = check_file(file)
    for line in lines:
        click.echo(line, err=status != 0)
    sys.exit(status)


@policy.command("schema")
def schema() -> None:
    """Print the policy file's JSON Schema (docs/policy.schema.json)."""
    click.echo(schema_text(), nl=False)
