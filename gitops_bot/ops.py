"""The operator's commands (show, list, retry, cancel, flags, reconcile, hooks): their logic.

Each talks to GITOPS_DATABASE_URL (and, for hooks, GitLab as the author bot) directly, so no web
server is needed; `cli.py` parses the arguments and prints what these return. A refusal is a
`Refused` (click prints it and exits 1). Text is aligned for people; `*_json` is for scripts.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import click
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from bot.config import Settings
from bot.core.diagram import path_diagram
from bot.core.events import Event, Source
from bot.core.labels import phase_title
from bot.core.states import TERMINAL
from bot.core.table import TABLE
from bot.errors import Conflict, IllegalTransition, NotOwner, UnknownOperation
from bot.queueing import QueueUnavailable
from bot.render.status import StatusView, load_status
from bot.services import Services
from bot.store.engine import make_engine
from bot.store.fire import FireResult, fire, with_conflict_retry
from bot.store.flags import DEFAULTS, UnknownFlag, get_flag, set_flag
from bot.store.models import FLAGS, OPERATIONS
from bot.store.queries import OperationView, iso_utc, step_name
from gitops_bot.wiring import build_services
from jobs.reconcile import ReconcileReport, run_reconcile
from jobs.sweep import PEOPLE_STATES, STEP_STATES
from webhooks.pages import collapsed_path, duration, error_detail, time_in_states, utc

#: The job that carries an operation on (the same one the API enqueues).
DRIVE_JOB = "jobs.drive.drive"


class Refused(click.ClickException):
    """The command cannot do what was asked; the message says why (exit status 1)."""


def operator_name() -> str:
    """Who runs the command, as the audit log records it: `cli:<login>`."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name in a bare container
        return "cli"


@contextmanager
def _database_errors(engine: Engine) -> Iterator[None]:
    """A database that cannot be used becomes one clear line instead of a traceback."""
    try:
        yield
    except (OperationalError, ProgrammingError) as exc:
        where = engine.url.render_as_string(hide_password=True)
        raise Refused(
            f"the database at {where} cannot be used ({type(exc.orig).__name__}); "
            "is it reachable, and has `gitops-bot db upgrade` been run?"
        ) from None


@contextmanager
def database(settings: Settings) -> Iterator[Engine]:
    """An engine on GITOPS_DATABASE_URL for one command."""
    engine = make_engine(settings.database_url)
    try:
        with _database_errors(engine):
            yield engine
    finally:
        engine.dispose()


@contextmanager
def running(settings: Settings) -> Iterator[Services]:
    """The bot's services (database and queue) for one command that acts."""
    services = build_services(settings)
    try:
        with _database_errors(services.engine):
            yield services
    finally:
        services.close()


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned to their widest cell; the last column is not padded."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def as_json(value: Any) -> str:
    """Compact JSON, as flags are shown and typed."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- show and list --------------------------------------------------------------------------------


def load(engine: Engine, operation_id: str) -> StatusView:
    """The operation's status view, or a refusal naming the id."""
    view = load_status(engine, operation_id)
    if view is None:
        raise Refused(f"no operation has the id {operation_id!r}")
    return view


def show_json(view: StatusView, now: datetime) -> dict[str, Any]:
    """One request for scripts: what `show` prints, with seconds spent in each state."""
    return {
        "operation_id": view.operation_id,
        "title": view.title,
        "requested_by": view.requested_by,
        "subject_id": view.subject_id,
        "target_key": view.target_key,
        "project": view.project,
        "phase": view.phase.value,
        "phase_title": phase_title(view.phase),
        "step": view.step.name,
        "step_code": view.step.value,
        "hint": {"kind": view.hint.kind, "text": view.hint.text},
        "error": error_detail(view),
        "mr_url": view.mr_url,
        "approval_id": view.approval_id,
        "merge_commit_sha": view.merge_commit_sha,
        "superseded": not view.owns_binding,
        "timeline": [
            {
                "at": iso_utc(item.entry.at),
                "from": item.entry.from_state,
                "to": item.entry.to_state,
                "event": item.entry.event,
                "step": step_name(item.entry.step),
                "step_code": item.entry.step,
                "source": item.entry.source,
                "actor": item.entry.actor,
                "detail": item.entry.detail,
                "stale": item.entry.stale,
                "seconds_in_state": item.seconds,
            }
            for item in time_in_states(view.timeline, now)
        ],
    }


def show_text(view: StatusView, now: datetime, *, diagram: bool = False) -> str:
    """One request for people: facts, hint, error, timeline with the time in each state."""
    facts = [
        ("Operation", view.operation_id),
        ("Title", view.title),
        ("Requested by", view.requested_by),
        ("Change", f"{view.subject_id} -> {view.target_key} ({view.project})"),
        ("Phase", f"{phase_title(view.phase)} ({view.phase.value})"),
        ("Step", f"{view.step.name} ({view.step.value})"),
        ("Hint", view.hint.text),
    ]
    detail = error_detail(view)
    if detail:
        facts.append(("Error", detail))
    if view.mr_url:
        facts.append(("MR", view.mr_url))
    if view.approval_id:
        facts.append(("Approval", view.approval_id))
    if view.merge_commit_sha:
        facts.append(("Merge commit", view.merge_commit_sha))
    if not view.owns_binding:
        facts.append(("Superseded", "a newer request replaced this one; this is where it ended"))
    width = max(len(name) for name, _ in facts)
    lines = [f"{name:<{width}}  {value}" for name, value in facts]
    finished = not view.owns_binding or view.phase in TERMINAL
    rows = []
    for item in time_in_states(view.timeline, now):
        e = item.entry
        change = (
            "ignored (stale event)" if e.stale else f"{e.from_state or '(new)'} -> {e.to_state}"
        )
        spent = "-" if item.seconds is None else duration(item.seconds)
        if item.current and not finished:
            spent += " so far"
        rows.append(
            [utc(e.at), change, e.event, step_name(e.step), e.source, e.actor or "-", spent]
        )
    header = ["TIME (UTC)", "FROM -> TO", "EVENT", "STEP", "SOURCE", "ACTOR", "IN STATE"]
    lines += ["", "Timeline", table(header, rows) if rows else "(no transitions recorded)"]
    if diagram:
        lines += ["", path_diagram(collapsed_path(view)).rstrip("\n")]
    return "\n".join(lines)


def list_json(views: Sequence[OperationView], now: datetime) -> list[dict[str, Any]]:
    """The listed operations for scripts (the API's shape, plus their age)."""
    return [
        {**view.as_json(), "age_seconds": (now - view.created_at).total_seconds()} for view in views
    ]


def list_text(views: Sequence[OperationView], now: datetime) -> str:
    """The listed operations for people, one line each."""
    if not views:
        return "no operations"
    rows = [
        [
            view.operation_id,
            view.phase.value,
            f"{view.step.name} {view.step.value}",
            duration((now - view.created_at).total_seconds()),
            f"{view.subject_id} -> {view.target_key}",
            view.mr_url or "-",
        ]
        for view in views
    ]
    return table(["OPERATION", "STATE", "STEP", "AGE", "SUBJECT -> TARGET", "MR"], rows)


# -- retry and cancel -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Acted:
    """What an operator action did: the transition, and how the work goes on."""

    result: FireResult
    follow_up: str


def allowed_in(event: Event) -> list[str]:
    """The states the transition table accepts `event` in."""
    return sorted({row.source.value for row in TABLE if row.event is event and row.source})


def act(services: Services, operation_id: str, event: Event, actor: str, now: datetime) -> Acted:
    """Fires RETRY or CANCEL as an operator; a retry then drives the operation on.

    With a Redis queue the drive job is enqueued; on the embedded default this process has no
    queue of the running bot's, so the retry sets the deadline to now and the bot's next sweep
    re-drives it. A retry also restarts the sweep's retry budget.
    """
    changes: dict[str, Any] = {}
    if event is Event.RETRY:
        changes["attempts"] = 0
        if services.settings.redis_url is None:
            changes["deadline_at"] = now
    verb = event.value
    try:
        result = with_conflict_retry(
            lambda: fire(
                services.engine,
                operation_id,
                event,
                source=Source.OPERATOR,
                actor=actor,
                changes=changes,
                now=now,
            )
        )
    except UnknownOperation:
        raise Refused(f"no operation has the id {operation_id!r}") from None
    except NotOwner:
        raise Refused(
            f"cannot {verb} {operation_id}: a newer request for the same subject and target "
            "replaced it (act on that one)"
        ) from None
    except IllegalTransition as exc:
        view = load_status(services.engine, operation_id)
        where = f"it is {view.phase.value} ({view.step.name})" if view else "its state refuses it"
        raise Refused(
            f"cannot {verb} {operation_id}: {where}; {verb} is allowed in "
            f"{', '.join(allowed_in(event))} [{exc}]"
        ) from None
    except Conflict:
        raise Refused(f"cannot {verb} {operation_id}: it kept moving; try again") from None
    if event is Event.CANCEL:
        follow = "the approval is withdrawn and the bot's MR closed through the outbox"
    elif services.settings.redis_url is None:
        follow = (
            "no GITOPS_REDIS_URL: the running bot's next sweep drives it"
            if result.new_state in (*STEP_STATES, *PEOPLE_STATES)
            else "it waits for the deployment's word (callback, GitLab event or reconciliation)"
        )
    else:
        try:
            services.queue.enqueue(DRIVE_JOB, operation_id, job_id=f"drive:{operation_id}")
            follow = "drive job queued"
        except QueueUnavailable:
            follow = "the queue is down: the sweep drives it once it is back"
    return Acted(result, follow)


def acted_text(acted: Acted) -> str:
    """One line: from -> to (step), then how it goes on."""
    r = acted.result
    before = r.old_state.value if r.old_state else "(new)"
    return (
        f"{r.event.value}: {r.operation_id} {before} -> {r.new_state.value} "
        f"({r.step.name} {r.step.value}); {acted.follow_up}"
    )


# -- flags ----------------------------------------------------------------------------------------


def flag_rows(engine: Engine) -> list[tuple[str, Any, datetime | None]]:
    """Every flag: (key, current value, when it was set; None while it has its default)."""
    with engine.connect() as conn:
        stored = {
            row.key: (row.value, row.updated_at)
            for row in conn.execute(
                select(FLAGS.c.key, FLAGS.c.value, FLAGS.c.updated_at).where(
                    FLAGS.c.key.in_(list(DEFAULTS))
                )
            )
        }
    return [(key, *stored.get(key, (default, None))) for key, default in DEFAULTS.items()]


def flags_text(engine: Engine) -> str:
    """The flags for people: key, value as JSON, and when it was set."""
    rows = [
        [key, as_json(value), "default" if at is None else f"set {utc(at)} UTC"]
        for key, value, at in flag_rows(engine)
    ]
    return table(["FLAG", "VALUE", "SINCE"], rows)


def parse_value(raw: str) -> Any:
    """A typed value: JSON when it parses (`3`, `[[10,6]]`, `"x"`), else the text itself."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def known(key: str) -> str:
    """`key`, or a refusal listing the flags there are."""
    if key not in DEFAULTS:
        raise Refused(f"unknown flag {key!r}; the flags are: {', '.join(DEFAULTS)}")
    return key


def get_value(engine: Engine, key: str) -> Any:
    """The flag's current value."""
    return get_flag(engine, known(key))


def set_value(engine: Engine, key: str, raw: str) -> tuple[Any, Any]:
    """Sets the flag from typed text; (old, new) values, or a refusal saying what it expects."""
    old = get_flag(engine, known(key))
    try:
        set_flag(engine, key, parse_value(raw))
    except UnknownFlag:
        raise Refused(f"unknown flag {key!r}") from None
    except ValueError as exc:
        raise Refused(f"refused: {exc} (got {raw!r}); the flag is unchanged") from None
    return old, get_flag(engine, key)


# -- reconcile ------------------------------------------------------------------------------------


def reconcile(
    engine: Engine, settings: Settings, now: datetime, *, dry_run: bool
) -> tuple[ReconcileReport, dict[str, str]]:
    """One reconciliation run (only a report with `dry_run`), with `project!iid` per operation."""
    report = run_reconcile(
        engine,
        now,
        min_age=settings.reconcile_min_age,
        max_age=settings.reconcile_max_age,
        dry_run=dry_run,
    )
    ids = [*report.exact, *report.watermark, *report.unmatched]
    names: dict[str, str] = {}
    if ids:
        query = select(OPERATIONS.c.id, OPERATIONS.c.project, OPERATIONS.c.mr_iid).where(
            OPERATIONS.c.id.in_(ids)
        )
        with engine.connect() as conn:
            names = {
                r.id: f"{r.project}!{r.mr_iid}" if r.mr_iid is not None else r.project
                for r in conn.execute(query)
            }
    return report, names


def reconcile_text(
    report: ReconcileReport, names: dict[str, str], settings: Settings, now: datetime, dry: bool
) -> str:
    """What matched how, and what was (or would be) validated."""
    oldest = now - timedelta(seconds=settings.reconcile_max_age)
    newest = now - timedelta(seconds=settings.reconcile_min_age)
    lines = [
        f"merged changes between {utc(oldest)} and {utc(newest)} UTC"
        + (" (dry run: nothing is changed)" if dry else "")
    ]
    groups = [
        ("exact", report.exact, "would be validated" if dry else "matched"),
        ("watermark", report.watermark, "would be validated" if dry else "matched"),
        ("unmatched", report.unmatched, "no deployment signal yet"),
    ]
    for name, ids, note in groups:
        lines.append(f"{name:<10} {len(ids):>4}  {note if ids else ''}".rstrip())
        lines += [f"    {op_id}  {names.get(op_id, '')}".rstrip() for op_id in ids]
    if not dry:
        lines.append(f"validated  {len(report.validated):>4}")
    return "\n".join(lines)


def reconcile_json(report: ReconcileReport, dry: bool) -> dict[str, Any]:
    """The run for scripts."""
    return {
        "dry_run": dry,
        "exact": report.exact,
        "watermark": report.watermark,
        "unmatched": report.unmatched,
        "validated": report.validated,
    }
