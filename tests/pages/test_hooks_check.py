"""The periodic hooks check: the gauge and the dashboard banner follow what GitLab shows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.approval import ApprovalClient
from bot.core.states import BindingState as S
from bot.gitlab import Account, ApproveComponent, make_client
from bot.gitlab.protection import ensure_protection
from bot.services import Clients
from bot.store.flags import all_flags
from bot.store.hooks import RESULT_KEY
from bot.store.models import FLAGS
from jobs import context, hooks
from sim.gitlab import GitLabDouble
from tests.builders import make_operation
from tests.metrics import database_gauge
from tests.pages import Pages

GITLAB = "https://gitlab.example.com"
AUTHOR_TOKEN = "author-token-abcdef"
PROJECT = "platform/config"
RECEIVER = "http://bot.test/webhooks/gitlab"


@pytest.fixture
def double() -> GitLabDouble:
    """GitLab with the managed project, our hook on it, the author bot as a maintainer and
    gitops/* protected for it alone (as `hooks install` leaves it)."""
    gitlab = GitLabDouble(GITLAB)
    gitlab.add_project(PROJECT)
    gitlab.add_user("gitops-bot", token=AUTHOR_TOKEN, access={PROJECT: 40})
    gitlab.add_hook(PROJECT, RECEIVER, token="hook-secret")
    gitlab.protect_branch(
        PROJECT, "gitops/*", push=("gitops-bot",), merge=("gitops-bot",), allow_force_push=True
    )
    return gitlab


def jobs_on(built: Pages) -> None:
    """Installs the app's services, with clients to the double, as this process's jobs' own."""
    clients = Clients(
        author=Account(make_client(GITLAB, AUTHOR_TOKEN)),
        approvers=[],
        approve=ApproveComponent(),
        approval=ApprovalClient("https://approvals.example.com"),
    )
    context.install(replace(built.app.extensions["gitops"], clients=clients))


@pytest.fixture
def pages(db: Engine) -> Iterator[Pages]:
    """The dashboard, with the jobs of this process running on the same services and GitLab."""
    built = Pages.build(db, gitlab_url=GITLAB, gitlab_token=AUTHOR_TOKEN, projects=("ghost/repo",))
    jobs_on(built)
    yield built
    context.uninstall()


def gauge(pages: Pages) -> float | None:
    """gitops_hooks_disabled as the next scrape reads it from the database."""
    return database_gauge(pages.engine, "gitops_hooks_disabled")


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
    assert gauge(pages) == 1
    html = pages.text("/")
    assert 'id="hooks-banner"' in html
    assert "GitLab disabled 1 webhook" in html
    assert f"hook #{hook_id}" in html
    assert "the bot's own hook" in html
    assert "<code>ghost/repo</code>" in html  # the project GitLab would not show us

    double.enable_hook(PROJECT, hook_id)
    with double.mocked(GITLAB):
        hooks.check()

    assert gauge(pages) == 0
    html = pages.text("/")
    assert "GitLab disabled" not in html


def test_all_hooks_well_means_no_banner(pages: Pages, double: GitLabDouble, db: Engine) -> None:
    """Every hook enabled and every project readable: gauge 0, no banner, and no stray flag."""
    make_operation(db, S.MERGING)
    built = Pages.build(db, gitlab_url=GITLAB, gitlab_token=AUTHOR_TOKEN)
    jobs_on(built)

    with double.mocked(GITLAB):
        report = hooks.check()

    assert report is not None
    assert (report.disabled, report.errors, report.missing) == ([], {}, [])
    assert gauge(pages) == 0
    assert 'id="hooks-banner"' not in built.text("/")
    assert RESULT_KEY not in all_flags(db)  # the stored result is not a flag


def unprotected_gauge(pages: Pages, project: str) -> float | None:
    """gitops_branch_protection_missing for a project as the next scrape reads it."""
    return database_gauge(pages.engine, "gitops_branch_protection_missing", {"project": project})


def test_unprotected_bot_branches_set_the_gauge_and_the_banner_then_clear(
    pages: Pages, double: GitLabDouble
) -> None:
    """gitops/* unprotected (or letting Developers push): gauge 1 and a banner naming the project;
    protected again by `hooks install`'s code, both clear."""
    make_operation(pages.engine, S.MERGING)
    double.protect_branch(PROJECT, "gitops/*", push=(30,), merge=(40,), allow_force_push=True)

    with double.mocked(GITLAB):
        report = hooks.check()

    assert report is not None
    assert report.unprotected == {
        PROJECT: "Developers + Maintainers may push; the author account may not push; "
        "Maintainers may merge; the author account may not merge"
    }
    assert unprotected_gauge(pages, PROJECT) == 1
    assert unprotected_gauge(pages, "ghost/repo") is None  # unreadable: unknown, not "protected"
    html = pages.text("/")
    assert 'id="protection-banner"' in html
    assert f"<li><code>{PROJECT}</code>: Developers + Maintainers may push" in html

    with double.mocked(GITLAB):
        author = Account(make_client(GITLAB, AUTHOR_TOKEN))
        ensure_protection(author.project(PROJECT), double.user("gitops-bot").id)
        hooks.check()

    assert unprotected_gauge(pages, PROJECT) == 0
    assert 'id="protection-banner"' not in pages.text("/")


def test_missing_protection_is_reported_and_ce_fallback_is_not(
    pages: Pages, double: GitLabDouble, db: Engine
) -> None:
    """No gitops/* rule is "not protected"; on CE a Maintainers rule is the accepted fallback."""
    make_operation(db, S.MERGING)
    built = Pages.build(db, gitlab_url=GITLAB, gitlab_token=AUTHOR_TOKEN)
    jobs_on(built)
    del double.project(PROJECT).protected_branches["gitops/*"]

    with double.mocked(GITLAB):
        missing = hooks.check()
    double.edition = "ce"
    double.protect_branch(PROJECT, "gitops/*", allow_force_push=True)
    with double.mocked(GITLAB):
        fallback = hooks.check()

    assert missing is not None
    assert missing.unprotected == {PROJECT: "not protected"}
    assert fallback is not None
    assert (fallback.unprotected, fallback.fallback) == ({}, [PROJECT])
    assert unprotected_gauge(pages, PROJECT) == 0
    assert 'id="hooks-banner"' not in built.text("/")


def test_an_unreadable_protection_is_an_error_not_a_clean_bill(
    pages: Pages, double: GitLabDouble, db: Engine
) -> None:
    """GitLab failing the protection read: the project is unchecked (no gauge), its disabled hook
    is still reported."""
    make_operation(db, S.MERGING)
    built = Pages.build(db, gitlab_url=GITLAB, gitlab_token=AUTHOR_TOKEN)
    jobs_on(built)
    double.disable_hook(PROJECT, next(iter(double.project(PROJECT).hooks)))
    double.fail_next(2, 503, methods="GET", path_contains="/protected_branches/")

    with double.mocked(GITLAB):
        report = hooks.check()

    assert report is not None
    assert [h.project for h in report.disabled] == [PROJECT]
    assert list(report.errors) == [PROJECT]
    assert "503" in report.errors[PROJECT]
    assert report.unprotected == {}
    assert unprotected_gauge(pages, PROJECT) is None
    assert "could not read the webhooks or the branch protection of" in built.text("/")


def test_dashboard_says_when_gitops_projects_is_unset(db: Engine) -> None:
    """Without GITOPS_PROJECTS a banner says every project reaching the bot is managed."""
    unscoped = Pages.build(db).text("/")
    scoped = Pages.build(db, projects=(PROJECT,)).text("/")

    assert 'id="projects-banner"' in unscoped
    assert "GITOPS_PROJECTS is not set" in unscoped
    assert "every project that sends the bot a webhook or is" in unscoped
    assert 'id="projects-banner"' not in scoped


def test_check_is_skipped_without_a_gitlab_token(db: Engine) -> None:
    """With no GITOPS_GITLAB_TOKEN the job makes no call and stores nothing."""
    context.install(Pages.build(db, gitlab_token="").app.extensions["gitops"])
    try:
        assert hooks.check() is None
    finally:
        context.uninstall()
    with db.connect() as conn:
        assert conn.execute(select(FLAGS.c.key)).scalars().all() == []


def test_the_hooks_check_is_a_periodic_job() -> None:
    """The schedule runs jobs.hooks.check under a stable id."""
    from bot.config import Settings
    from jobs.schedule import periodic_jobs

    jobs = {job.id: job for job in periodic_jobs(Settings())}
    assert jobs["gitops-hooks"].func == "jobs.hooks.check"
    assert jobs["gitops-hooks"].interval > 0
