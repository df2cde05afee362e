"""The operator's commands of `gitops-bot`: show, list, retry, cancel, queue, flags, reconcile,
hooks, doctor, outbox, report, clients (gitops_bot/ops_clients.py).

Each parses its arguments, runs on the services `ops.connected` builds for it, and prints what
the logic in gitops_bot/ops*.py returns; cli.py adds them to the `gitops-bot` group.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click

from bot.config import Settings
from bot.core.events import Event
from bot.core.states import BindingState
from gitops_bot.ops_clients import clients

if TYPE_CHECKING:
    from bot.services import Services

T = TypeVar("T")


def _echo_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


@click.command()
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


@click.command("list")
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


def _acting(actor: str | None, act: Callable[[Services, str, bool], T]) -> T:
    """Runs an operator action as `actor` (default cli:$USER) on the services, telling it whether
    this process's queue reaches the bot; a refusal exits 1 with its message."""
    from bot.app import operator
    from gitops_bot import ops

    with ops.connected(Settings.from_env()) as services:
        try:
            # the embedded default's queue lives in the bot's own process, not this one
            reaches_bot = services.settings.redis_url is not None
            return act(services, actor or ops.operator_name(), reaches_bot)
        except operator.OperatorRefused as refused:
            raise ops.Refused(refused.message) from None


def _operator_action(operation_id: str, event: Event, actor: str | None) -> None:
    from bot.app import operator

    moved = _acting(
        actor,
        lambda services, who, reaches_bot: operator.move(
            services, operation_id, event, actor=who, queue_reaches_bot=reaches_bot
        ),
    )
    click.echo(operator.move_text(moved))


_ACTOR = click.option(
    "--actor", default=None, help="Recorded in the audit log (default cli:$USER)."
)


@click.command()
@click.argument("operation_id")
@_ACTOR
def retry(operation_id: str, actor: str | None) -> None:
    """Re-run the step where the request stopped (every step is safe to run again).

    The step a retry starts at is the one the transition table names for the current state;
    there is no --step: any other step would be a state write the table does not allow.
    """
    _operator_action(operation_id, Event.RETRY, actor)


@click.command()
@click.argument("operation_id")
@_ACTOR
def cancel(operation_id: str, actor: str | None) -> None:
    """Close the request: its approval is withdrawn and the bot's MR closed."""
    _operator_action(operation_id, Event.CANCEL, actor)


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def queue(ctx: click.Context, as_json: bool) -> None:
    """List the merge queues: per project and target branch, the changes waiting to merge in
    their order (a change paused on its pipeline lets the next go ahead)."""
    if ctx.invoked_subcommand is not None:
        return
    from bot.store.queue import all_lines, lines_json
    from gitops_bot import ops, ops_queue

    with ops.connected(Settings.from_env()) as services:
        entries = all_lines(services.engine)
    if as_json:
        _echo_json(lines_json(entries))
    else:
        click.echo(ops_queue.queue_text(entries))


@queue.command("promote")
@click.argument("operation_id")
@_ACTOR
def queue_promote(operation_id: str, actor: str | None) -> None:
    """Move a merging change to the front of its branch's merge queue, then drive the line's
    head; exit 1, changing nothing, for a change in no queue."""
    from bot.app import promote
    from gitops_bot import ops_queue

    promotion = _acting(
        actor,
        lambda services, who, reaches_bot: promote.promote(
            services, operation_id, actor=who, queue_reaches_bot=reaches_bot
        ),
    )
    click.echo(ops_queue.promote_text(operation_id, promotion))


@click.group(invoke_without_command=True)
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


@click.command("reconcile")
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


@click.group()
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
    from gitops_bot import ops, ops_hooks

    with ops.connected(Settings.from_env()) as services:
        result, _ = ops_hooks.install_hook(services, project, url)
        click.echo(ops_hooks.install_text(project, result))
        if result.disabled:
            click.echo(
                "warning: GitLab still shows the hook disabled; send a test event from the "
                "project's webhook settings to re-enable it",
                err=True,
            )
        protected, username = ops_hooks.protect_branches(services, project)
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


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def doctor(as_json: bool) -> None:
    """Check the configuration against the real services: database, queue, GitLab, the tokens
    (valid, distinct users, scope, access), each managed project's hook and gitops/* rule, the
    approval system and the public URL. Prints a fix for each miss; exit 1 on any miss."""
    from bot.app.doctor import misses
    from bot.store.models import utcnow
    from gitops_bot import ops_doctor

    checks = ops_doctor.diagnose(Settings.from_env(), utcnow())
    if as_json:
        _echo_json(ops_doctor.doctor_json(checks))
    else:
        click.echo(ops_doctor.doctor_text(checks))
    sys.exit(1 if misses(checks) else 0)


@click.group("outbox")
def outbox() -> None:
    """Effects waiting to be performed (status comments, labels, closes, withdrawals), and the
    dead ones: failed for good, waiting for an operator to retry or drop them."""


@outbox.command("list")
@click.option("--dead", "dead_only", is_flag=True, help="Only the dead rows.")
@click.option("--limit", type=click.IntRange(1, 10000), default=200, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def outbox_list(dead_only: bool, limit: int, as_json: bool) -> None:
    """Rows not yet performed, dead first: id, status, operation, effect, tries, last error."""
    from bot.store.models import utcnow
    from bot.store.outbox import unsent_rows
    from gitops_bot import ops, ops_outbox

    with ops.connected(Settings.from_env()) as services:
        rows = unsent_rows(services.engine, dead_only=dead_only, limit=limit)
    if as_json:
        _echo_json([r.as_json() for r in rows])
    else:
        click.echo(ops_outbox.list_text(rows, utcnow(), dead_only=dead_only))


@outbox.command("retry")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all-dead", is_flag=True, help="Every dead row.")
@_ACTOR
def outbox_retry(ids: tuple[int, ...], all_dead: bool, actor: str | None) -> None:
    """Send dead rows again: due now, their tries counted from 0 (audited on the operation)."""
    from bot.store.models import utcnow
    from gitops_bot import ops, ops_outbox

    if bool(ids) == all_dead:
        raise click.UsageError("give the ids of dead rows, or --all-dead")
    with ops.connected(Settings.from_env()) as services:
        who = actor or ops.operator_name()
        rows = ops_outbox.retry(services, ids, all_dead, who, utcnow())
        follow = (
            "the running bot's dispatcher sends {them} within "
            f"{services.settings.outbox_interval} s "
            "(GITOPS_OUTBOX_INTERVAL)"
        )
    click.echo(ops_outbox.done_text("retried", rows, follow))


@outbox.command("drop")
@click.argument("ids", nargs=-1, type=int, required=True)
@_ACTOR
def outbox_drop(ids: tuple[int, ...], actor: str | None) -> None:
    """Give up on dead rows: never performed, recorded with your name (audited)."""
    from bot.store.models import utcnow
    from gitops_bot import ops, ops_outbox

    with ops.connected(Settings.from_env()) as services:
        who = actor or ops.operator_name()
        rows = ops_outbox.drop(services, ids, who, utcnow())
    click.echo(ops_outbox.done_text("dropped", rows, f"never performed; dropped by {who}"))


#: What `gitops-bot demo` says when the simulators are not installed.


@click.command("report")
@click.option(
    "--since",
    default="24h",
    show_default=True,
    help="The window: stays that ended within it (or go on); 90s, 30m, 24h, 7d, 1h30m.",
)
@click.option("--project", default=None, help="Only this project's changes (its path).")
@click.option(
    "--slowest", type=click.IntRange(0, 1000), default=10, show_default=True, help="Changes listed."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def report_command(since: str, project: str | None, slowest: int, as_json: bool) -> None:
    """Where changes wait: p50, p95 and max time in each state over the window, and the
    slowest changes (from the audit log; a change still in a state counts until now)."""
    from bot.store.models import utcnow
    from bot.store.report import time_in_state
    from gitops_bot import ops, ops_report

    now = utcnow()
    start = ops_report.window(now, since)
    with ops.connected(Settings.from_env()) as services:
        report = time_in_state(services.engine, now, start, project=project, slowest=slowest)
    if as_json:
        _echo_json(ops_report.report_json(report))
    else:
        click.echo(ops_report.report_text(report))


#: The commands cli.py adds to `gitops-bot`.
COMMANDS: tuple[click.Command, ...] = (
    show,
    list_command,
    retry,
    cancel,
    queue,
    flags,
    reconcile_command,
    hooks,
    doctor,
    outbox,
    report_command,
    clients,
)
