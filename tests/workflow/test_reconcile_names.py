"""Reconciliation's names: the watermark whatever form (path or numeric id) names the project,
paths in any case, and a signal counting only for the change whose project and MR it names."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.app.reconcile import ReconcileReport, run_reconcile
from bot.core.states import BindingState as S
from bot.store.flags import set_flag
from bot.store.models import utcnow
from bot.store.operations import touch
from bot.store.signals import record_signal
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


def merged_change(db: Engine) -> tuple[str, dict[str, object]]:
    """A MERGED change in platform/config (id 14), MR !7; its id and row."""
    op_id = make_operation(db, S.MERGED)
    touch(db, op_id, project_id=14)
    return op_id, operation(db, op_id)


def reconcile_now(db: Engine) -> ReconcileReport:
    """A run late enough to see the change merged in the test."""
    return run_reconcile(db, utcnow() + timedelta(seconds=300), min_age=120, max_age=86400)


@pytest.mark.parametrize(
    ("project", "mr_iid", "sha"),
    [
        ("other/app", 7, None),
        ("15", 7, None),
        ("platform/config", 8, None),
        ("platform/config", 8, "e" * 40),
    ],
)
def test_a_signal_naming_the_operation_but_not_its_project_and_mr_validates_nothing(
    db: Engine, project: str, mr_iid: int, sha: str | None
) -> None:
    """A success signal kept with the change's operation_id (as callbacks were kept before
    they were checked) but another project or MR leaves the change unmatched and MERGED."""
    op_id, _ = merged_change(db)
    record_signal(
        db,
        source="callback",
        project_id=project,
        status="success",
        mr_iid=mr_iid,
        operation_id=op_id,
        sha=sha,
    )
    report = reconcile_now(db)
    assert report.unmatched == [op_id]
    assert report.validated == []


def test_a_deployed_sha_counts_only_in_the_changes_own_project(db: Engine) -> None:
    """Another project's deployment of the same SHA does not validate the change; its own does."""
    op_id, row = merged_change(db)
    sha = str(row["merge_commit_sha"])
    record_signal(db, source="deployment", project_id="15", status="success", sha=sha)
    assert reconcile_now(db).unmatched == [op_id]
    record_signal(db, source="deployment", project_id="14", status="success", sha=sha)
    assert reconcile_now(db).validated == [op_id]


def test_a_signal_naming_the_project_path_in_another_case_matches(db: Engine) -> None:
    """GitLab paths are case-insensitive: "Platform/Config" !7 validates platform/config !7,
    and a mismatch signal for the very same MR never does."""
    op_id, _ = merged_change(db)
    record_signal(db, source="callback", project_id="platform/config", status="mismatch", mr_iid=7)
    assert reconcile_now(db).unmatched == [op_id]
    record_signal(db, source="callback", project_id="Platform/Config", status="success", mr_iid=7)
    report = reconcile_now(db)
    assert report.exact == [op_id]
    assert report.validated == [op_id]
