"""Reconciliation's watermark whatever form (path or numeric id) names the project."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.store.flags import set_flag
from bot.store.models import utcnow
from bot.store.operations import touch
from bot.workflow.signals import record_signal
from jobs.reconcile import run_reconcile
from tests.builders import make_operation, operation


@pytest.mark.parametrize(
    ("flag", "signal_project"),
    [("platform/config", "14"), ("14", "platform/config"), ("14", "14")],
)
def test_watermark_matches_the_project_by_path_or_id(
    db: Engine, flag: str, signal_project: str
) -> None:
    """The flag names the project one way and the deployment pipeline another: still matched."""
    early = make_operation(db, S.MERGED, subject_id="early")
    touch(db, early, project_id=14)
    record_signal(
        db,
        source="callback",
        project_id=signal_project,
        status="success",
        mr_iid=operation(db, early)["mr_iid"] + 5,
    )
    set_flag(db, "reconcile.watermark_projects", [flag])
    report = run_reconcile(db, utcnow() + timedelta(seconds=300), min_age=120, max_age=86400)
    assert report.watermark == [early]
    assert report.validated == [early]
