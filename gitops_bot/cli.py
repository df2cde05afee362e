"""The `gitops-bot` command: run the processes, migrate, inspect the state machine (the
operator's commands are in cli_ops.py)."""

from __future__ import annotations

import sys

import click

from bot import logs
from bot.config import LogSettings, Settings
from bot.core import checks
from bot.core.diagram import mermaid
from bot.core.table import TABLE
from gitops_bot import cli_ops
from gitops_bot.ops_policy import policy


@click.group()
def main() -> None:
    """gitops-bot: GitOps change requests carried through GitLab, shown on the MR."""
    try:
        logs.configure("cli", LogSettings.from_env())
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _settings(role: str) -> Settings:
    """The settings of a long-running process, read once; its log lines say `role`."""
    settings = Settings.from_env()
    logs.configure(role, settings.logs)
    return settings


@main.command()
@click.option("--port", type=int, default=None, help="Port to listen on (default: $PORT or 8000).")
@click.option("--host", default="127.0.0.1", show_default=True)
def serve(port: int | None, host: str) -> None:
    """Run everything in one process on the embedded default (SQLite, in-process queue)."""
    settings = _settings("serve")  # before the imports, whose lines are this process's too
    from gitops_bot import runner

    runner.serve(settings, host=host, port=port or settings.port)


@main.command()
@click.option("--port", type=int, default=None, help="Port to listen on (default: $PORT or 8000).")
@click.option("--host", default="0.0.0.0", show_default=True)
def web(port: int | None, host: str) -> None:
    """Run the web app under gunicorn (the Procfile's `web`), after upgrading the schema."""
    settings = _settings("web")
    from gitops_bot import runner

    runner.web(settings, host=host, port=port or settings.port)


@main.command("worker")
@click.option("--burst", is_flag=True, help="Work until the queue is empty, then exit.")
def worker_command(burst: bool) -> None:
    """Run an RQ worker (the Procfile's `worker`); needs GITOPS_REDIS_URL."""
    settings = _settings("worker")
    from gitops_bot import runner

    runner.worker(settings, burst=burst)


@main.command("scheduler")
def scheduler_command() -> None:
    """Run rq-scheduler for the periodic jobs (Procfile `scheduler`); needs GITOPS_REDIS_URL."""
    settings = _settings("scheduler")
    from gitops_bot import runner

    runner.scheduler(settings)


@main.group()
def db() -> None:
    """Database schema."""


@db.command()
def upgrade() -> None:
    """Create or upgrade the schema (Alembic migrations) on GITOPS_DATABASE_URL."""
    from bot.store.engine import make_engine
    from bot.store.migrate import upgrade as do_upgrade

    settings = Settings.from_env()
    engine = make_engine(settings.database_url)
    try:
        do_upgrade(engine)
    finally:
        engine.dispose()
    click.echo(f"schema is at head on {engine.url.render_as_string(hide_password=True)}")


@main.group(invoke_without_command=True)
@click.option("--mermaid", "as_mermaid", is_flag=True, help="Print the Mermaid state diagram.")
@click.pass_context
def transitions(ctx: click.Context, as_mermaid: bool) -> None:
    """Print the transition table (or its diagram)."""
    if ctx.invoked_subcommand is not None:
        return
    if as_mermaid:
        click.echo(mermaid(), nl=False)
        return
    width = max(len(str(r.source)) for r in TABLE)
    for row in TABLE:
        source = "(new)" if row.source is None else row.source.value
        guard = f" [{row.guard}]" if row.guard else ""
        effects = f"  +{','.join(e.value for e in row.effects)}" if row.effects else ""
        click.echo(
            f"{source:<{width}}  --{row.event.value}{guard}-->  {row.target.value}"
            f"  ({row.step.name} {row.step.value}){effects}"
        )


@transitions.command()
def check() -> None:
    """Validate the table: reachability, exits, deadlines, terminal states. Non-zero on a fault."""
    found = checks.problems()
    for problem in found:
        click.echo(f"FAULT {problem}", err=True)
    if found:
        sys.exit(1)
    click.echo(f"transition table ok: {len(TABLE)} transitions")


# -- the operator's commands (gitops_bot/cli_ops.py; their logic in gitops_bot/ops*.py) -----------

for _command in cli_ops.COMMANDS:
    main.add_command(_command)

main.add_command(policy)  # gitops_bot/ops_policy.py: needs no settings, runs in a repo's CI


DEMO_NEEDS_SIM = (
    "gitops-bot demo needs the simulators (the GitLab double, approval system and deployment "
    "pipeline), which the product does not ship: they are the `sim` package of the gitops-bot "
    "repository. In a checkout, scripts/serve or scripts/test sets up .venv with them, or run "
    "`pip install -e ./sim` in the environment where gitops-bot is installed."
)


@main.command()
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds allowed.")
@click.option("--port", type=int, default=None, help="The bot's port (default: a free one).")
def demo(timeout: float, port: int | None) -> None:
    """See the bot work: a GitLab double, fake approval and deployment systems, two changes.

    Runs the embedded bot on a temporary SQLite database (GITOPS_* settings are not used),
    submits one change in each step order and prints each move until both are VALIDATED.
    Exits 1 if they are not within --timeout seconds.
    """
    # The simulators are a distribution of their own (sim/), never in the product's wheel.
    try:
        from sim import demo as the_demo
    except ModuleNotFoundError as missing:
        if missing.name != "sim":
            raise
        raise click.ClickException(DEMO_NEEDS_SIM) from None
    sys.exit(the_demo.run(click.echo, port=port, timeout=timeout))
