"""Reconciliation: merged changes whose deployment word was lost are found and validated.

MERGED operations whose merge lies in the window (now - max_age, now - min_age) are matched
against the deployment signals kept in the database: exactly (a signal naming the operation that
also names its project and its MR or merge commit, or its project and MR iid, or its project and
a deployed SHA equal to its merge commit), else by the per-project watermark of MR iids where
the deployment pipeline runs in merge order. Project paths compare case-insensitively. Only
"success" signals count (a callback that did not match its change is kept as "mismatch"). Two
queries per run, whatever the number of rows (bot/store/reconcile.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.app.events.validate import mark_validated
from bot.core.events import Source
from bot.services import Services
from bot.store.engine import Engine
from bot.store.flags import get_flag
from bot.store.models import utcnow
from bot.store.reconcile import MergedChange, Signal, merged_and_signals


@dataclass
class ReconcileReport:
    """What one run found: operations matched exactly, by watermark, and still unmatched."""

    exact: list[str] = field(default_factory=list)
    watermark: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    validated: list[str] = field(default_factory=list)


def _names(op: MergedChange) -> set[str]:
    """The project names a signal may use for this operation (paths casefolded)."""
    return {op.project.casefold()} | ({str(op.project_id)} if op.project_id is not None else set())


def _agrees(op: MergedChange, signal: Signal) -> bool:
    """True when a signal naming this operation also names its project and its MR or merge
    commit: one naming another change's project or MR validates nothing."""
    if str(signal.project_id).casefold() not in _names(op):
        return False
    same_mr = signal.mr_iid is not None and signal.mr_iid == op.mr_iid
    return same_mr or (signal.sha is not None and signal.sha == op.merge_commit_sha)


def reconcile(
    services: Services, now: datetime | None = None, dry_run: bool = False
) -> ReconcileReport:
    """One reconciliation run (a periodic job); `dry_run` only reports."""
    settings = services.settings
    return run_reconcile(
        services.engine,
        now or utcnow(),
        min_age=settings.reconcile_min_age,
        max_age=settings.reconcile_max_age,
        dry_run=dry_run,
    )


def run_reconcile(
    engine: Engine, now: datetime, *, min_age: int, max_age: int, dry_run: bool = False
) -> ReconcileReport:
    """Reconciliation over this database at `now`."""
    oldest, newest = now - timedelta(seconds=max_age), now - timedelta(seconds=min_age)
    merged, signals = merged_and_signals(engine, oldest, newest)
    report = ReconcileReport()
    by_op: dict[str, list[Signal]] = defaultdict(list)
    for s in signals:
        if s.operation_id:
            by_op[s.operation_id].append(s)
    by_mr = {(s.project_id.casefold(), s.mr_iid) for s in signals if s.mr_iid is not None}
    by_sha = {(s.project_id.casefold(), s.sha) for s in signals if s.sha}
    highest: dict[str, tuple[int, datetime]] = defaultdict(lambda: (0, now))
    for s in signals:
        key = s.project_id.casefold()
        if s.mr_iid is not None and s.mr_iid > highest[key][0]:
            highest[key] = (s.mr_iid, s.received_at)
    flag = get_flag(engine, "reconcile.watermark_projects") if merged else []
    in_order = {str(name).casefold() for name in flag}
    for op in merged:
        if (
            any(_agrees(op, s) for s in by_op.get(op.id, ()))
            or any((key, op.mr_iid) in by_mr for key in _names(op))
            or any((key, op.merge_commit_sha) in by_sha for key in _names(op))
        ):
            report.exact.append(op.id)
        elif (
            op.mr_iid is not None
            # the flag may name the project by path or id, and so may the signals: any pairing
            and _names(op) & in_order
            and any(
                highest[key][0] > op.mr_iid
                and (op.merged_at is None or highest[key][1] >= op.merged_at)
                for key in _names(op)
            )
        ):
            report.watermark.append(op.id)
        else:
            report.unmatched.append(op.id)
    if not dry_run:
        for op_id in (*report.exact, *report.watermark):
            if mark_validated(engine, op_id, source=Source.RECONCILE, actor="reconcile").moved:
                report.validated.append(op_id)
    return report
