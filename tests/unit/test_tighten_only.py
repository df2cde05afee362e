"""A repository's policy file only ever tightens the server's values: each key that would loosen
one is a `policy check` error naming the key at its line and column, and the use-time functions
hold a policy recorded before the rule to the server's values too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.app.policy import (
    approver_accounts,
    deploy_timeout,
    limits_from,
    parse_checked,
    poll_tiers,
)
from bot.config import Settings
from bot.errors import CannotProceed
from bot.gitlab import Account
from bot.policy import POLICY_PATH, Policy, PolicyError
from bot.policy.tighten import Limits
from bot.store.flags import DEFAULTS

SETTINGS = Settings(approver_tokens=("t1", "t2", "t3"), deploy_timeout=3600)
LIMITS = limits_from(SETTINGS, DEFAULTS)


def problems(text: str, limits: Limits = LIMITS) -> list[str]:
    """The file's problems as `file:line:col: message` (empty: it is accepted)."""
    try:
        parse_checked(text, POLICY_PATH, limits)
    except PolicyError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.mark.parametrize(
    ("text", "key", "where"),
    [
        ("approvals:\n  approvers: []\n", "approvals.approvers", "2:14"),
        ("approvals:\n  required: 1\n", "approvals.required", "2:13"),
        ("deploy:\n  timeout: 604800\n", "deploy.timeout", "2:12"),
        ("merge_queue:\n  enabled: false\n", "merge_queue.enabled", "2:12"),
        ("workflow:\n  order: mr_first\n", "workflow.order", "2:10"),
        ("commands:\n  min_access:\n    apply: guest\n", "commands.min_access.apply", "3:12"),
        ("poll:\n  pipeline_tiers: [[1, 5]]\n", "poll.pipeline_tiers", "2:19"),
        ("poll:\n  pending_tiers: [[86400, 10000]]\n", "poll.pending_tiers", "2:18"),
    ],
)
def test_each_loosening_key_is_an_error_naming_it(text: str, key: str, where: str) -> None:
    """The attack's values from the issue (no approver, one of three, seven days, queue off,
    another step order, guests applying, hammering or endless polls) are refused at the key."""
    found = problems(text)
    assert len(found) == 1, found
    assert found[0].startswith(f"{POLICY_PATH}:{where}: {key}: ")


def test_tiers_out_of_any_bound_are_refused_by_the_schema() -> None:
    """`[[1e20, 1]]` (which crashed a step) is refused before any comparison, at the value:
    YAML reads `1e20` as text, `1.0e+20` as an integral float, which is above a day."""
    assert problems("poll:\n  pipeline_tiers: [[1e20, 1]]\n")
    found = problems("poll:\n  pipeline_tiers: [[1.0e+20, 1]]\n")
    assert found
    assert "86400" in found[0]


def test_what_tightens_is_accepted() -> None:
    """More approvals, a shorter deploy timeout, slower and shorter polls, the queue on, higher
    command levels, narrower paths and branches: all accepted as written."""
    text = (
        "approvals: {required: 3, approvers: [a, b, c]}\n"
        "deploy: {timeout: 600}\n"
        "merge_queue: {enabled: true}\n"
        "commands: {min_access: {apply: maintainer}}\n"
        "poll: {pipeline_tiers: [[30, 10]]}\n"
        "paths: {allowed: [config/]}\n"
        "target_branches: [main]\n"
    )
    assert problems(text) == []


def test_the_server_requiring_fewer_lets_the_file_pick_among_the_accounts() -> None:
    """With GITOPS_APPROVALS_REQUIRED=2 of three accounts, a file naming two is fine; one is not."""
    limits = replace(LIMITS, approvals_required=2)
    assert problems("approvals: {approvers: [a, b]}\n", limits) == []
    assert problems("approvals: {approvers: [a]}\n", limits)
    assert problems("approvals: {required: 4}\n", limits)  # more than there are accounts


class _Named(Account):
    """An approver account whose username is known without GitLab."""

    def __init__(self, name: str, label: str) -> None:
        super().__init__(gl=None, label=label, _username=name)  # type: ignore[arg-type]


ACCOUNTS = [_Named("a", "approver-1"), _Named("b", "approver-2"), _Named("c", "approver-3")]


def test_a_recorded_policy_never_approves_with_fewer_than_the_server_requires() -> None:
    """A policy recorded before the rule (`approvers: []`, `required: 1`) still gets every
    account by default; one naming an unknown account stops with the policy named."""
    assert approver_accounts(ACCOUNTS, Policy()) == ACCOUNTS
    assert approver_accounts(ACCOUNTS, Policy.model_validate({"approvals": {"required": 1}})) == (
        ACCOUNTS
    )
    with pytest.raises(CannotProceed, match=r"approvals\.approvers"):
        approver_accounts(ACCOUNTS, Policy.model_validate({"approvals": {"approvers": []}}))
    picked = Policy.model_validate({"approvals": {"approvers": ["a", "c"]}})
    assert approver_accounts(ACCOUNTS, picked, required=2) == [ACCOUNTS[0], ACCOUNTS[2]]
    with pytest.raises(CannotProceed, match=r"approvals\.approvers"):
        approver_accounts(ACCOUNTS, Policy.model_validate({"approvals": {"approvers": ["x"]}}), 1)


def test_a_recorded_policy_never_waits_longer_or_polls_faster() -> None:
    """Seven days of deploy timeout is cut to the server's; tiers past the flag's are the flag's."""
    week = Policy.model_validate({"deploy": {"timeout": 604800}})
    assert deploy_timeout(SETTINGS, week) == 3600
    assert deploy_timeout(SETTINGS, Policy.model_validate({"deploy": {"timeout": 60}})) == 60
    server = DEFAULTS["poll.pipeline_tiers"]
    fast = Policy.model_validate({"poll": {"pipeline_tiers": [[1, 5]]}})
    assert poll_tiers(fast, "pipeline", server) == server
    slow = Policy.model_validate({"poll": {"pipeline_tiers": [[60, 5]]}})
    assert poll_tiers(slow, "pipeline", server) == [[60, 5]]
