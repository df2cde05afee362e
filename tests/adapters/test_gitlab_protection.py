"""`bot.gitlab.protection` against the GitLab double: `gitops/*` protected so that only the author
account pushes and merges (Premium) or Maintainers (the CE fallback), read first, idempotent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.gitlab import Account, Project, make_client
from bot.gitlab.protection import (
    AUTHOR_ONLY,
    MAINTAINERS,
    AccessView,
    ProtectionView,
    author_identity,
    ensure_protection,
    judge,
    read_protection,
)
from sim.gitlab import Access, ApiError, GitLabDouble

URL = "https://gitlab.example.com"
PROJECT = "platform/config"
TOKEN = "author-token"


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project; the author account and alice are Maintainers, dev a Developer."""
    d = GitLabDouble(URL)
    d.add_project(PROJECT, files={"config/prod.yaml": "replicas: 2\n"})
    d.add_user("gitops-bot", token=TOKEN, access={PROJECT: Access.MAINTAINER})
    d.add_user("alice", access={PROJECT: Access.MAINTAINER})
    d.add_user("dev", access={PROJECT: Access.DEVELOPER})
    with d.mocked(URL):
        yield d


@pytest.fixture
def project(double: GitLabDouble) -> Project:
    """The project as the author account sees it."""
    return Account(make_client(URL, TOKEN)).project(PROJECT)


def author(double: GitLabDouble) -> int:
    """The author account's user id."""
    return double.user("gitops-bot").id


def pushers(double: GitLabDouble) -> list[str]:
    """Who may push a commit to gitops/op-1 (tried as each person, then undone)."""
    allowed = []
    for who in ("gitops-bot", "alice", "dev"):
        try:
            double.push(PROJECT, "gitops/op-1", {"probe": who}, author=who, start_branch="main")
        except ApiError:
            continue
        allowed.append(who)
        double.project(PROJECT).branches.pop("gitops/op-1", None)
    return allowed


def test_premium_creates_an_author_only_rule_then_leaves_it(
    double: GitLabDouble, project: Project
) -> None:
    """First run creates the rule (one GET, one POST); the second only reads it."""
    first = ensure_protection(project, author(double))
    calls = len(double.calls)
    second = ensure_protection(project, author(double))

    assert (first.action, first.before, first.verdict.ok, first.verdict.mode) == (
        "created",
        ("not protected",),
        True,
        AUTHOR_ONLY,
    )
    assert (second.action, second.verdict.mode) == ("unchanged", AUTHOR_ONLY)
    assert [c.method for c in double.calls[calls:]] == ["GET"]
    rule = double.protection(PROJECT, "gitops/*")
    assert rule is not None
    assert [(e.user_id, e.access_level) for e in rule.push] == [(author(double), None)]
    assert [e.user_id for e in rule.merge] == [author(double)]
    assert rule.allow_force_push is True
    assert pushers(double) == ["gitops-bot"]


def test_premium_fixes_a_wider_rule_in_one_patch(double: GitLabDouble, project: Project) -> None:
    """Developers and alice allowed, no force push: one PATCH leaves only the author account."""
    double.protect_branch(PROJECT, "gitops/*", push=(30, "alice"), merge=(40,))

    result = ensure_protection(project, author(double))

    assert result.action == "fixed"
    assert "Developers + Maintainers may push" in result.before
    assert f"user #{double.user('alice').id} may push" in result.before
    assert "force push is off (GitLab would refuse the bot's rebases)" in result.before
    assert result.verdict.mode == AUTHOR_ONLY
    assert double.count("PATCH", "/protected_branches/") == 1
    assert double.count("DELETE", "/protected_branches/") == 0
    assert pushers(double) == ["gitops-bot"]


def test_ce_falls_back_to_maintainers(double: GitLabDouble, project: Project) -> None:
    """On CE the per-user request yields Maintainers (40); that is accepted as the fallback."""
    double.edition = "ce"

    result = ensure_protection(project, author(double))
    again = ensure_protection(project, author(double))

    assert (result.action, result.verdict.ok, result.verdict.mode) == ("created", True, MAINTAINERS)
    assert again.action == "unchanged"
    rule = double.protection(PROJECT, "gitops/*")
    assert rule is not None
    assert [e.access_level for e in rule.push + rule.merge] == [40, 40]
    assert pushers(double) == ["gitops-bot", "alice"]


def test_ce_replaces_a_developers_rule(double: GitLabDouble, project: Project) -> None:
    """On CE a rule letting Developers push is unprotected and protected again (PATCH can't)."""
    double.edition = "ce"
    double.protect_branch(PROJECT, "gitops/*", push=(30,), merge=(30,), allow_force_push=True)

    result = ensure_protection(project, author(double))

    assert (result.action, result.verdict.mode) == ("fixed", MAINTAINERS)
    assert double.count("DELETE", "/protected_branches/") == 1
    assert pushers(double) == ["gitops-bot", "alice"]


def test_ce_only_force_push_off_is_one_patch(double: GitLabDouble, project: Project) -> None:
    """On CE a Maintainers rule without force push gets one PATCH turning it on."""
    double.edition = "ce"
    double.protect_branch(PROJECT, "gitops/*")

    result = ensure_protection(project, author(double))

    assert result.before == ("force push is off (GitLab would refuse the bot's rebases)",)
    assert double.count("PATCH", "/protected_branches/") == 1
    assert double.count("DELETE", "/protected_branches/") == 0
    assert result.verdict.ok


def test_read_and_identity(double: GitLabDouble, project: Project) -> None:
    """read_protection is None for a missing rule; author_identity reads GET /user."""
    assert read_protection(project) is None
    assert author_identity(project.account) == (author(double), "gitops-bot")


def test_judge_on_answers_of_both_editions() -> None:
    """Premium answers (with user_id keys) need the one user; CE answers accept Maintainers."""
    user = AccessView(1, None, 7, None, None)
    maintainers = AccessView(2, 40, None, None, None)
    premium = ProtectionView("gitops/*", (user,), (user,), True, per_user=True)
    premium_wide = ProtectionView("gitops/*", (maintainers,), (user,), True, per_user=True)
    ce = ProtectionView("gitops/*", (maintainers,), (maintainers,), True, per_user=False)
    nobody = ProtectionView("gitops/*", (AccessView(3, 0, None, None, None),), (), True, False)

    assert judge(premium, 7).mode == AUTHOR_ONLY
    assert judge(premium, 8).problems == (
        "user #7 may push",
        "the author account may not push",
        "user #7 may merge",
        "the author account may not merge",
    )
    assert judge(premium_wide, 7).problems == (
        "Maintainers may push",
        "the author account may not push",
    )
    assert judge(ce, 7).mode == MAINTAINERS
    assert not judge(nobody, 7).ok
    assert judge(None, 7).problems == ("not protected",)
    parsed = ProtectionView.from_json(
        {
            "name": "gitops/*",
            "push_access_levels": [{"id": 1, "access_level": None, "user_id": 7, "group_id": None}],
            "merge_access_levels": [{"id": 2, "access_level": 40, "access_level_description": "M"}],
            "allow_force_push": True,
        }
    )
    assert parsed.per_user
    assert parsed.push == (user,)
