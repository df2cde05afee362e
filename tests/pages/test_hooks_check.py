"""The periodic hooks check: the gauge and the dashboard banner follow what GitLab shows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.approval import ApprovalClient
from bot.core.states import BindingState as S
from bot.gitlab import Account, ApproveComponent, make_client
from bot.store.flags import all_flags
from bot.store.models import FLAGS
from jobs import hooks, runtime
from tests.builders import make_operation
from tests.gitlab_double import GitLabDouble
from tests.pages import Pages

GITLAB = "https://gitlab.example.com"
AUTHOR_TOKEN = "author-token-abcdef"
PROJECT = "platform/config"
RECEIVER = "http://bot.test/webhooks/gitlab"


@pytest.fixture
def double() -> GitLabDouble:
    """GitLab with the managed project, our hook on it, and the author bot as a maintainer."""
    gitlab = GitLabDouble(GITLAB)
    gitlab.add_project(PROJECT)
    gitlab.add_user("gitops-bot", token=AUTHOR_TOKEN, access={PROJECT: 40})
    gitlab.add_hook(PROJECT, RECEIVER, token="hook-secret")
    return gitlab


@pytest.fixture
def pages(db: Engine) -> Iterator[Pages]:
    """The dashboard, with the jobs of this process running on the same services and GitLab."""
    built = Pages.build(db, gitlab_url=GITLAB, gitlab_token=AUTHOR_TOKEN, projects=("ghost/repo",))
    runtime.use(built.app.extensions["gitops"])
    runtime.use_clients(
        runtime.Clients(
            author=Account(make_client(GITLAB, AUTHOR_TOKEN)),
            approvers=[],
            approve=ApproveComponent(),
            approval=ApprovalClient("https://approvals.example.com"),
        )
    )
    yield built
    runtime.use(None)
    runtime.use_clients(None)


def gauge() -> float | None:
    """The current value of gitops_hooks_disabled."""
    return REGISTRY.get_sample_value("gitops_hooks_disabled")


def test_disabled_hook_sets_the_gauge_and_the_banner_then_both_clear(
    pages: Pages, double: GitLabDouble
) -> None:
    """A hook GitLab disabled raises the gauge and shows a banner; re-enabled, both clear."""
    make_operation(pages.engine, S.MERGING)  # names platform/config: a managed project
    hook_id = next(iter(double.project(PROJECT).hooks))
    double.disable_hook(PROJECT, hook_id)

    with double.mocked(GITLAB):
        report = hooks.check()

    assert report is not None
    assert report.projects == ["ghost/repo", PROJECT]
    assert [(h.project, h.hook_id, h.ours) for h in report.disabled] == [(PROJECT, hook_id, True)]
    assert gauge() == 1
    html = pages.text("/")
    assert 'id="hooks-banner"' in html
    assert "GitLab disabled 1 webhook" in html
    assert f"hook #{hook_id}" in html
    assert "the bot's own hook" in html
    assert "<code>ghost/repo</code>" in html  # the project GitLab would not show us

    double.enable_hook(PROJECT, hook_id)
    with double.mocked(GITLAB):
        hooks.check()

    assert gauge() == 0
    html = pages.text("/")
    assert "GitLab disabled" not in html


def test_all_hooks_well_means_no_banner(pages: Pages, double: GitLabDouble, db: Engine) -> None:
    """Every hook enabled and every project readable: gauge 0, no banner, and no stray flag."""
    make_operation(db, S.MERGING)
    built = Pages.build(db, gitlab_url=GITLAB, gitlab_token=AUTHOR_TOKEN)
    runtime.use(built.app.extensions["gitops"])

    with double.mocked(GITLAB):
        report = hooks.check()

    assert report is not None
    assert (report.disabled, report.errors, report.missing) == ([], {}, [])
    assert gauge() == 0
    assert 'id="hooks-banner"' not in built.text("/")
    assert hooks.RESULT_KEY not in all_flags(db)  # the stored result is not a flag


def test_check_is_skipped_without_a_gitlab_token(db: Engine) -> None:
    """With no GITOPS_GITLAB_TOKEN the job makes no call and stores nothing."""
    runtime.use(Pages.build(db, gitlab_token="").app.extensions["gitops"])
    try:
        assert hooks.check() is None
    finally:
        runtime.use(None)
    with db.connect() as conn:
        assert conn.execute(select(FLAGS.c.key)).scalars().all() == []


def test_the_hooks_check_is_a_periodic_job() -> None:
    """The schedule runs jobs.hooks.check under a stable id."""
    from bot.config import Settings
    from jobs.schedule import periodic_jobs

    jobs = {job.id: job for job in periodic_jobs(Settings())}
    assert jobs["gitops-hooks"].func == "jobs.hooks.check"
    assert jobs["gitops-hooks"].interval > 0
