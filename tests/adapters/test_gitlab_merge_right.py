"""`bot.gitlab.protection.merge_right` (may an account merge into a target branch, as doctor
judges it from the protected branches API) says what the GitLab double's own rule says
(`sim.gitlab.protection.can_merge`), over rules, wildcards, access levels and both editions."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from bot.gitlab import Account, make_client
from bot.gitlab.protection import AccessView, ProtectionView, covers, list_protection, merge_right
from sim.gitlab import Access, GitLabDouble
from sim.gitlab import protection as double_rules

URL = "https://gitlab.example.com"
PROJECT = "platform/config"
READER = "reader-token"
#: What a push or merge list may hold: roles, or the user entry of the account judged.
LISTS: list[tuple[int | str, ...]] = [(0,), (30,), (40,), ("candidate",), (0, "candidate")]
RULES = ["main", "ma*", "*", "release/*"]


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A project; a Maintainer reads the rules, `candidate` is judged."""
    d = GitLabDouble(URL)
    d.add_project(PROJECT)
    d.add_user("reader", token=READER, access={PROJECT: Access.MAINTAINER})
    d.add_user("candidate", access={PROJECT: Access.DEVELOPER})
    with d.mocked(URL):
        yield d


def _double_says(double: GitLabDouble, branch: str) -> bool:
    return double_rules.can_merge(
        double.state, double.project(PROJECT), double.user("candidate"), branch
    )


@pytest.mark.parametrize("edition", ["premium", "ce"])
def test_merge_right_agrees_with_the_double(double: GitLabDouble, edition: str) -> None:
    """For every rule name, push and merge list and access level: "yes" exactly when the double
    would let the account merge into `main`, and never "unknown" (no group entries here)."""
    double.edition = edition
    project = Account(make_client(URL, READER)).project(PROJECT)
    candidate = double.user("candidate")
    checked = 0
    for rule, push, merge, level in itertools.product(RULES, LISTS, LISTS, (20, 30, 40)):
        double.project(PROJECT).protected_branches.clear()
        double.protect_branch(PROJECT, rule, push=push, merge=merge)
        double.add_member(PROJECT, "candidate", level)
        right = merge_right(list_protection(project), "main", candidate.id, level)
        assert right.verdict != "unknown"
        assert (right.verdict == "yes") == _double_says(double, "main"), (rule, push, merge, level)
        checked += 1
    assert checked == len(RULES) * len(LISTS) ** 2 * 3


def test_an_unprotected_branch_is_mergeable_and_a_group_entry_is_not_judged() -> None:
    """No matching rule: yes (for a Developer). Only a group entry could let the account in:
    unknown. Below Developer: no, whatever the rules."""
    group = AccessView(1, 30, None, 7, None)
    rule = ProtectionView("main", (), (group,), False, True)
    assert merge_right([rule], "release/1", 5, 40).verdict == "yes"
    assert merge_right([rule], "main", 5, 40).verdict == "unknown"
    assert "group #7" in merge_right([rule], "main", 5, 40).text
    assert merge_right([rule], "main", 5, 20).verdict == "no"
    assert merge_right([], "main", 5, 20).verdict == "no"


@pytest.mark.parametrize(
    ("rule", "branch", "covered"),
    [
        ("main", "main", True),
        ("main", "main2", False),
        ("*", "release/1/x", True),
        ("release/*", "release/1", True),
        ("release/*", "releases/1", False),
        ("*-stable", "1-0-stable", True),
        ("a.b", "axb", False),
    ],
)
def test_covers_as_the_double_matches(rule: str, branch: str, covered: bool) -> None:
    """Rule names match branches as GitLab (and the double) match them."""
    assert covers(rule, branch) is covered
    assert double_rules.matches(rule, branch) is covered
