"""The policy file only ever tightens what the operator set: every key it may hold is compared with
the server's value in the stricter direction, and a key that would loosen is a problem naming it.

Pure: the server's values come in as `Limits` (bot/app/policy.py builds them from the settings and
the flags of the moment; `gitops-bot policy check` from the environment it runs in).

- `paths.allowed` narrows GITOPS_ALLOWED_PATHS (a path must be allowed by both) and never names a
  built-in protected path;
- `paths.protected` adds protected paths (changing them needs a Maintainer);
- `target_branches` narrows GITOPS_TARGET_BRANCHES (unset: the default branch);
- `validators` add checks;
- `workflow.order`: nothing, the step order is the operator's (the `workflow.order` flag);
- `commands.min_access` raises a verb's level above the flag's, never lowers it;
- `approvals.required` raises GITOPS_APPROVALS_REQUIRED (unset: every approver account), up to
  the number of approver accounts;
- `approvals.approvers` picks among the approver accounts, at least as many as are required;
- `poll.<kind>_tiers` poll no more often than the flag's shortest interval and stop no later;
- `deploy.timeout` shortens GITOPS_DEPLOY_TIMEOUT;
- `merge_queue.enabled` may say `true`: the queue cannot be turned off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.policy.model import ACCESS_LEVELS, Policy

#: Where each problem is: the path of keys (and indexes) in the file, and what is wrong.
Loosening = tuple[tuple[Any, ...], str]

_LEVEL_NAMES = {level: name for name, level in ACCESS_LEVELS.items()}


@dataclass(frozen=True, slots=True)
class Limits:
    """The server's values a policy file is held to (see the module's table)."""

    #: the `commands.min_access` flag: verb -> access level
    min_access: Mapping[str, int] = field(default_factory=dict)
    #: how many approver accounts are configured (GITOPS_APPROVER_TOKENS)
    approver_accounts: int = 0
    #: how many of them must approve each change (GITOPS_APPROVALS_REQUIRED; None: all)
    approvals_required: int | None = None
    #: the `poll.<kind>_tiers` flags by kind (`pipeline`, `rebase`, ...)
    tiers: Mapping[str, Sequence[Sequence[int]]] = field(default_factory=dict)
    #: GITOPS_DEPLOY_TIMEOUT
    deploy_timeout: int = 3600
    #: the `workflow.order` flag (named in the refusal)
    workflow_order: str = "approve_first"

    @property
    def required(self) -> int:
        """How many approver accounts approve each change unless the file asks for more."""
        if self.approvals_required is None:
            return self.approver_accounts
        return min(self.approvals_required, self.approver_accounts)


def total_seconds(tiers: Sequence[Sequence[int]]) -> int:
    """How long a wait polling by `tiers` ([[interval_seconds, polls], ...]) lasts at most."""
    return sum(int(interval) * int(polls) for interval, polls in tiers)


def tiers_within(tiers: Sequence[Sequence[int]], server: Sequence[Sequence[int]]) -> str | None:
    """Why `tiers` poll more often than, or longer than, the server's tiers (None: they do not)."""
    if not server:
        return None
    fastest = min(int(interval) for interval, _ in server)
    quick = [int(interval) for interval, _ in tiers if int(interval) < fastest]
    if quick:
        return (
            f"polls every {min(quick)} s, more often than the server's shortest interval "
            f"({fastest} s)"
        )
    mine, theirs = total_seconds(tiers), total_seconds(server)
    if mine > theirs:
        return f"waits {mine} s in all, longer than the server's {theirs} s"
    return None


def loosenings(policy: Policy, limits: Limits) -> list[Loosening]:
    """Every key of `policy` that would loosen the server's values, with where it is and why."""
    found: list[Loosening] = []
    if policy.workflow.order is not None:
        found.append(
            (
                ("workflow", "order"),
                "the step order is the operator's (the workflow.order flag, now "
                f"{limits.workflow_order}); a policy file cannot set it",
            )
        )
    found.extend(_min_access(policy, limits))
    found.extend(_approvals(policy, limits))
    for kind, server in limits.tiers.items():
        tiers = getattr(policy.poll, f"{kind}_tiers", None)
        why = None if tiers is None else tiers_within(tiers, server)
        if why is not None:
            found.append((("poll", f"{kind}_tiers"), f"{why}; a policy file may only tighten it"))
    timeout = policy.deploy.timeout
    if timeout is not None and timeout > limits.deploy_timeout:
        found.append(
            (
                ("deploy", "timeout"),
                f"{timeout} s is longer than the server's GITOPS_DEPLOY_TIMEOUT "
                f"({limits.deploy_timeout} s); a policy file may only shorten it",
            )
        )
    if policy.merge_queue.enabled is False:
        found.append(
            (
                ("merge_queue", "enabled"),
                "the merge queue is on for every project; a policy file cannot turn it off",
            )
        )
    return found


def _min_access(policy: Policy, limits: Limits) -> list[Loosening]:
    found: list[Loosening] = []
    for verb, level in policy.min_access().items():
        server = limits.min_access.get(verb)
        if server is not None and level < server:
            found.append(
                (
                    ("commands", "min_access", verb),
                    f"{_LEVEL_NAMES.get(level, level)} is below the server's level for "
                    f"{verb} ({_LEVEL_NAMES.get(server, server)}); a policy file may only raise it",
                )
            )
    return found


def _approvals(policy: Policy, limits: Limits) -> list[Loosening]:
    found: list[Loosening] = []
    required = limits.required
    asked = policy.approvals.required
    if asked is not None and asked < required:
        found.append(
            (
                ("approvals", "required"),
                f"{asked} is fewer than the {required} approvals the server requires; a policy "
                "file may only ask for more",
            )
        )
    if asked is not None and asked > limits.approver_accounts:
        found.append(
            (
                ("approvals", "required"),
                f"{asked} approvals asked for, but {limits.approver_accounts} approver accounts "
                "are configured (GITOPS_APPROVER_TOKENS)",
            )
        )
    named = policy.approvals.approvers
    wanted = max(required, asked or 0)
    if named is not None and len(set(named)) < wanted:
        found.append(
            (
                ("approvals", "approvers"),
                f"names {len(set(named))} approver accounts, fewer than the {wanted} that must "
                "approve each change; a policy file may only pick among them, never approve "
                "with fewer",
            )
        )
    return found
