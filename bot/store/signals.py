"""Deployment signals: every deploy callback, deployment event and target-branch pipeline, kept
for reconciliation (a lost or unmatched one is found again later)."""

from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from bot.store.models import DEPLOY_SIGNALS, utcnow


def record_signal(
    engine: Engine,
    *,
    source: str,
    project_id: str,
    status: str,
    mr_iid: int | None = None,
    operation_id: str | None = None,
    sha: str | None = None,
) -> None:
    """Keeps the signal for reconciliation (a lost or unmatched one is found again later)."""
    with engine.begin() as conn:
        conn.execute(
            insert(DEPLOY_SIGNALS).values(
                source=source,
                project_id=project_id,
                mr_iid=mr_iid,
                operation_id=operation_id,
                sha=sha,
                status=status,
                received_at=utcnow(),
            )
        )
