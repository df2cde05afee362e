"""The `gitops-bot` command: run the processes, migrate, inspect the state machine."""

from __future__ import annotations

import logging
import sys

import click

from bot.config import Settings
from bot.core import checks
from bot.core.diagram import mermaid
from bot.core.table import TABLE


@click.group()
def main() -> None:
    """gitops-bot: GitOps change requests carried through GitLab, shown on the MR."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")


@main.command()
@click.option("--port", type=int, default=None, help="Port to listen on (default: $PORT or 8000).")
@click.option("--host", default="127.0.0.1", show_default=True)
def serve(port: int | None, host: str) -> None:
    """Run everything in one process on the embedded default (SQLite, in-process queue)."""
    from gitops_bot import runner

    settings = Settings.from_env()
    runner.serve(settings, host=host, port=port or settings.port)


@main.command()
@click.option("--port", type=int, default=None, help="Port to listen on (default: $PORT or 8000).")
@click.option("--host", default="0.0.0.0", show_default=True)
def web(port: int | None, host: str) -> None:
    """Run the web app under gunicorn (the Procfile's `web`), after upgrading the schema."""
    from gitops_bot import runner

    settings = Settings.from_env()
    runner.web(settings, host=host, port=port or settings.port)


@main.command("worker")
@click.option("--burst", is_flag=True, help="Work until the queue is empty, then exit.")
def worker_command(burst: bool) -> None:
    """Run an RQ worker (the Procfile's `worker`); needs GITOPS_REDIS_URL."""
    from gitops_bot import runner

    runner.worker(Settings.from_env(), burst=burst)


@main.command("scheduler")
def scheduler_command() -> None:
    """Run rq-scheduler for the periodic jobs (Procfile `scheduler`); needs GITOPS_REDIS_URL."""
    from gitops_bot import runner

    runner.scheduler(Settings.from_env())


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
