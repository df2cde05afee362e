"""Reconciliation's reads: the merged changes of a window and the deployment signals they may
match, two queries on one connection whatever the number of rows (jobs/reconcile.py matches).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.states import BindingState
from bot.store.models import BINDINGS, DEPLOY_SIGNALS, OPERATIONS


@dataclass(frozen=True, slots=True)
class MergedChange:
    """A MERGED operation as reconciliation matches it."""

    id: str
    project: str
    project_id: int | None
    mr_iid: int | None
    merge_commit_sha: str | None
    merged_at: datetime | None


@dataclass(frozen=True, slots=True)
class Signal:
    """A "success" deployment signal: the project (path or id as sent), MR, operation, SHA."""

    project_id: str
    mr_iid: int | None
    operation_id: str | None
    sha: str | None
    received_at: datetime


def merged_and_signals(
    engine: Engine, oldest: datetime, newest: datetime
) -> tuple[list[MergedChange], list[Signal]]:
    """MERGED operations merged between `oldest` and `newest`, and the success signals received
    since `oldest` (not read when nothing was merged)."""
    merged_query = (
        select(
            OPERATIONS.c.id,
            OPERATIONS.c.project,
            OPERATIONS.c.project_id,
            OPERATIONS.c.mr_iid,
            OPERATIONS.c.merge_commit_sha,
            OPERATIONS.c.merged_at,
        )
        .join(BINDINGS, BINDINGS.c.operation_id == OPERATIONS.c.id)
        .where(
            BINDINGS.c.state == BindingState.MERGED,
            OPERATIONS.c.merged_at > oldest,
            OPERATIONS.c.merged_at < newest,
        )
    )
    signal_query = select(
        DEPLOY_SIGNALS.c.project_id,
        DEPLOY_SIGNALS.c.mr_iid,
        DEPLOY_SIGNALS.c.operation_id,
        DEPLOY_SIGNALS.c.sha,
        DEPLOY_SIGNALS.c.received_at,
    ).where(DEPLOY_SIGNALS.c.status == "success", DEPLOY_SIGNALS.c.received_at > oldest)
    with engine.connect() as conn:
        merged = [MergedChange(*row) for row in conn.execute(merged_query)]
        signals = [Signal(*row) for row in conn.execute(signal_query)] if merged else []
    return merged, signals


def mr_names(engine: Engine, operation_ids: Sequence[str]) -> dict[str, str]:
    """`project!iid` (or the project alone, before an MR) of each operation, for reports."""
    if not operation_ids:
        return {}
    query = select(OPERATIONS.c.id, OPERATIONS.c.project, OPERATIONS.c.mr_iid).where(
        OPERATIONS.c.id.in_(operation_ids)
    )
    with engine.connect() as conn:
        return {
            r.id: f"{r.project}!{r.mr_iid}" if r.mr_iid is not None else r.project
            for r in conn.execute(query)
        }
