"""The operator's `reconcile`: one run now (or a dry run), with each change's project and MR."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bot.app.reconcile import ReconcileReport, run_reconcile
from bot.config import Settings
from bot.services import Services
from bot.store.reconcile import mr_names
from webhooks.pages import utc


def reconcile(
    services: Services, now: datetime, *, dry_run: bool
) -> tuple[ReconcileReport, dict[str, str]]:
    """One reconciliation run (only a report with `dry_run`), with `project!iid` per operation."""
    settings = services.settings
    report = run_reconcile(
        services.engine,
        now,
        min_age=settings.reconcile_min_age,
        max_age=settings.reconcile_max_age,
        dry_run=dry_run,
    )
    ids = [*report.exact, *report.watermark, *report.unmatched]
    return report, mr_names(services.engine, ids)


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
