"""The `gitops-bot` command: run the processes, migrate, inspect the state machine."""

from __future__ import annotations

import json
import logging
import sys

import click

from bot.config import Settings
from bot.core import checks
from bot.core.diagram import mermaid
from bot.core.events import Event
from bot.core.states import BindingState
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


# -- the operator's commands (logic in gitops_bot/ops.py) -----------------------------------------


def _echo_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


@main.command()
@click.argument("operation_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("--mermaid", "as_mermaid", is_flag=True, help="Also print the path as Mermaid.")
def show(operation_id: str, as_json: bool, as_mermaid: bool) -> None:
    """One request: phase, step, hint, error and its timeline with the time in each state."""
    from bot.store.models import utcnow
    from gitops_bot import ops

    with ops.connected(Settings.from_env()) as services:
        view = ops.load(services, operation_id)
    now = utcnow()
    if as_json:
        _echo_json(ops.show_json(view, now))
    else:
        click.echo(ops.show_text(view, now, diagram=as_mermaid))


@main.command("list")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in BindingState], case_sensitive=False),
    help="Only these states (repeat for several); default: all.",
)
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def list_command(states: tuple[str, ...], limit: int, as_json: bool) -> None:
    """Current requests (those owning their subject and target), newest first."""
    from bot.store.models import utcnow
    from bot.store.queries import list_by_state
    from gitops_bot import ops

    wanted = [BindingState(s.upper()) for s in states]
    with ops.connected(Settings.from_env()) as services:
        views = list_by_state(services.engine, wanted, limit)
    now = utcnow()
    if as_json:
        _echo_json(ops.list_json(views, now))
    else:
        click.echo(ops.list_text(views, now))


def _operator_action(operation_id: str, event: Event, actor: str | None) -> None:
    from bot.store.models import utcnow
    from gitops_bot import ops, ops_act

    with ops.connected(Settings.from_env()) as services:
        acted = ops_act.act(services, operation_id, event, actor or ops.operator_name(), utcnow())
    click.echo(ops_act.acted_text(acted))


_ACTOR = click.option(
    "--actor", default=None, help="Recorded in the audit log (default cli:$USER)."
)


@main.command()
@click.argument("operation_id")
@_ACTOR
def retry(operation_id: str, actor: str | None) -> None:
    """Re-run the step where the request stopped (every step is safe to run again).

    The step a retry starts at is the one the transition table names for the current state;
    there is no --step: any other step would be a state write the table does not allow.
    """
    _operator_action(operation_id, Event.RETRY, actor)


@main.command()
@click.argument("operation_id")
@_ACTOR
def cancel(operation_id: str, actor: str | None) -> None:
    """Close the request: its approval is withdrawn and the bot's MR closed."""
    _operator_action(operation_id, Event.CANCEL, actor)


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def flags(ctx: click.Context, as_json: bool) -> None:
    """List the dynamic flags (read per use: a change needs no restart); get and set one."""
    if ctx.invoked_subcommand is not None:
        return
    from gitops_bot import ops, ops_flags

    with ops.connected(Settings.from_env()) as services:
        if as_json:
            _echo_json(ops_flags.flag_values(services))
        else:
            click.echo(ops_flags.flags_text(services))


@flags.command("get")
@click.argument("key")
def flags_get(key: str) -> None:
    """Print one flag's value as JSON."""
    from gitops_bot import ops, ops_flags

    with ops.connected(Settings.from_env()) as services:
        click.echo(ops.as_json(ops_flags.get_value(services, key)))


@flags.command("set")
@click.argument("key")
@click.argument("value")
def flags_set(key: str, value: str) -> None:
    """Set a flag; VALUE is JSON (`3`, `[[10,6],[30,10]]`), or else taken as text."""
    from gitops_bot import ops, ops_flags

    with ops.connected(Settings.from_env()) as services:
        old, new = ops_flags.set_value(services, key, value)
    click.echo(f"{key} = {ops.as_json(new)} (was {ops.as_json(old)}); used from the next read on")


@main.command("reconcile")
@click.option("--dry-run", is_flag=True, help="Only report what would be validated.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def reconcile_command(dry_run: bool, as_json: bool) -> None:
    """Match merged changes against deployment signals (exact, watermark, unmatched)."""
    from bot.store.models import utcnow
    from gitops_bot import ops, ops_reconcile

    settings = Settings.from_env()
    now = utcnow()
    with ops.connected(settings) as services:
        report, names = ops_reconcile.reconcile(services, now, dry_run=dry_run)
    if as_json:
        _echo_json(ops_reconcile.reconcile_json(report, dry_run))
    else:
        click.echo(ops_reconcile.reconcile_text(report, names, settings, now, dry_run))


@main.group()
def hooks() -> None:
    """The managed projects' GitLab webhooks to the bot."""


@hooks.command("install")
@click.argument("project")
@click.option(
    "--url", default=None, help="Receiver URL (default $GITOPS_PUBLIC_URL/webhooks/gitlab)."
)
def hooks_install(project: str, url: str | None) -> None:
    """Create or update PROJECT's hook (MR, pipeline, note, deployment events) and protect
    gitops/* so only the bot's author account pushes and merges there; idempotent.

    Exit 1 when either cannot be done as needed."""
    from gitops_bot import ops_hooks

    settings = Settings.from_env()
    result, _ = ops_hooks.install_hook(settings, project, url)
    click.echo(ops_hooks.install_text(project, result))
    if result.disabled:
        click.echo(
            "warning: GitLab still shows the hook disabled; send a test event from the "
            "project's webhook settings to re-enable it",
            err=True,
        )
    protected, username = ops_hooks.protect_branches(settings, project)
    click.echo(ops_hooks.protect_text(project, protected, username))
    if not protected.verdict.ok:
        sys.exit(1)


@hooks.command("check")
@click.option("--project", "projects", multiple=True, help="Only these (default: all managed).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def hooks_check(projects: tuple[str, ...], as_json: bool) -> None:
    """Report hooks GitLab disabled after failed deliveries and projects whose gitops/* is not
    protected (exit 1; 2: a project unreadable)."""
    from bot.store.models import utcnow
    from gitops_bot import ops, ops_hooks

    with ops.connected(Settings.from_env()) as services:
        report = ops_hooks.check_hooks(services, projects, utcnow())
    if as_json:
        _echo_json(report.as_json())
    else:
        click.echo(ops_hooks.check_text(report))
    sys.exit(ops_hooks.check_status(report))


#: What `gitops-bot demo` says when the simulators are not installed.
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
