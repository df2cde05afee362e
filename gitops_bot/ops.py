"""The operator's commands: what they share (services, refusals, tables), `show` and `list`.

Each command talks to GITOPS_DATABASE_URL (and, for hooks, GitLab as the author bot) directly, so
no web server is needed; `cli.py` parses the arguments and prints what these return. A refusal is
a `Refused` (click prints it and exits 1). Text is aligned for people; `*_json` is for scripts.
Retry and cancel are bot/app/operator.py's (as for the API and MR commands), flags in
ops_flags.py, reconcile in ops_reconcile.py, hooks in ops_hooks.py, doctor in
ops_doctor.py.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click

from bot.config import Settings
from bot.core.diagram import path_diagram
from bot.core.labels import phase_title
from bot.core.states import TERMINAL
from bot.render.queue import place_text
from bot.render.status import StatusView, load_status
from bot.services import Services
from bot.store.queries import OperationView, iso_utc, step_name
from gitops_bot.wiring import DatabaseUnusable, build_services, database_errors
from webhooks.pages import collapsed_path, duration, error_detail, time_in_states, utc


class Refused(click.ClickException):
    """The command cannot do what was asked; the message says why (exit status 1)."""


def operator_name() -> str:
    """Who runs the command, as the audit log records it: `cli:<login>`."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name in a bare container
        return "cli"


@contextmanager
def connected(settings: Settings) -> Iterator[Services]:
    """The bot's services (database, queue, clients) for one command, released afterwards; a
    database that cannot be used is a refusal saying so."""
    services = build_services(settings)
    try:
        with database_errors(services):
            yield services
    except DatabaseUnusable as exc:
        raise Refused(str(exc)) from None
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


def load(services: Services, operation_id: str) -> StatusView:
    """The operation's status view, or a refusal naming the id."""
    view = load_status(services.engine, operation_id)
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
        "queue": view.queue.as_json() if view.queue else None,
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
    if view.queue:
        facts.append(("Merge queue", place_text(view.queue)))
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
        change = e.unmoved or f"{e.from_state or '(new)'} -> {e.to_state}"
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
