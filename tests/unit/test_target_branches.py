"""Which branches a change may target (bot/core/branches.py): protected ones the operator lists
(unset: the default branch), narrowed by a policy file, matched in linear time."""

from __future__ import annotations

import time

import pytest

from bot.core.branches import matches, refusal


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("main", "main", True),
        ("main", "main2", False),
        ("release/*", "release/1.0", True),
        ("release/*", "release/a/b", True),
        ("release/*", "releases/1", False),
        ("*-stable", "16-stable", True),
        ("*-stable", "16-stable-x", False),
        ("a*b*c", "abc", True),
        ("a*b*c", "acb", False),
        ("Main", "main", False),
        ("*", "anything", True),
    ],
)
def test_wildcards_match_as_gitlab_protected_branches_do(
    pattern: str, name: str, expected: bool
) -> None:
    """`*` is any text, `/` included; everything else literal and case-sensitive."""
    assert matches(pattern, name) is expected


def test_a_hostile_pattern_costs_milliseconds() -> None:
    """A policy file's `*a*a*a*a*a*a*b` against a 255-character name does not backtrack (budget:
    well under a second where a backtracking glob takes minutes)."""
    started = time.monotonic()
    assert not matches("*a" * 100 + "*b", "a" * 255)
    assert time.monotonic() - started < 0.5


def test_the_default_branch_alone_when_the_operator_lists_none() -> None:
    """Unset GITOPS_TARGET_BRANCHES: the protected default branch only."""
    assert refusal("main", protected=True, default=True, operator=()) is None
    why = refusal("release/1", protected=True, default=False, operator=())
    assert why is not None
    assert "default branch" in why


def test_an_unprotected_branch_is_never_a_target() -> None:
    """A branch any Developer pushes to (its CI file and policy are theirs) is refused, even when
    the operator's list names it."""
    why = refusal("attack", protected=False, default=False, operator=("*",))
    assert why is not None
    assert "not a protected branch" in why


def test_the_policy_file_only_narrows() -> None:
    """A branch must be in the operator's list and, when the file lists any, in the file's."""
    operator = ("main", "release/*")
    assert refusal("release/2", protected=True, default=False, operator=operator) is None
    narrowed = refusal(
        "release/2", protected=True, default=False, operator=operator, repository=["main"]
    )
    assert narrowed is not None
    assert "policy file" in narrowed
    widened = refusal(
        "staging", protected=True, default=False, operator=operator, repository=["staging"]
    )
    assert widened is not None
    assert "GITOPS_TARGET_BRANCHES" in widened
