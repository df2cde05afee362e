"""The repository policy (`.gitops/bot.yml`) a change follows, and the target it starts from: both
fixed once when it starts and recorded on it; every later step reads what was recorded (`of`),
never the file again, so a policy changed mid-flight alters only the changes that start after it.

When a change starts (`read_at_start`): its target branch is read once (bot/gitlab/policy_file.py:
its head commit, whether it is protected, whether it is the default branch) and must be one the
operator allows (bot/core/branches.py: protected, and GITOPS_TARGET_BRANCHES, unset: the default
branch); the policy file is read at that head's commit SHA, never at the branch's name (a tag of
the same name would shadow it), and its own `target_branches` may narrow the rule. The commit is
recorded (`operations.policy_sha`): the change's schemas and CI configuration are read there too,
and the bot's branch starts from it.

What the file leaves out comes from the environment: GITOPS_ALLOWED_PATHS, the flags. What it
sets may tighten the environment, never loosen it: every key is compared with the server's value
(bot/policy/tighten.py holds the table), and one that would loosen -- or a `paths.allowed` entry
naming a built-in protected path -- makes the file invalid with the key's file:line:col
(`parse_checked`, used when a change starts and by `gitops-bot policy check`): an entry that
cannot mean what it says is a mistake or an attack, and a refusal says so where it is written.
The use-time functions below hold a policy recorded before a rule existed to the same bounds.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from bot.config import Settings
from bot.core import branches
from bot.core.commands import Rules, Verb, rules_from
from bot.core.path_policy import narrowed, unlocks
from bot.errors import CannotProceed
from bot.gitlab import Account, GitLabError
from bot.gitlab.policy_file import (
    BranchHead,
    NoSuchBranch,
    NoSuchProject,
    read_branch,
    read_file_at,
)
from bot.policy import POLICY_PATH, Policy, PolicyError, parse_policy
from bot.policy.parse import Problem, yaml_position
from bot.policy.tighten import Limits, loosenings, tiers_within
from bot.services import Services
from bot.store.flags import all_flags
from bot.store.operations import OperationRow

log = logging.getLogger(__name__)


class StartRefused(Exception):
    """A new change cannot start: `code` says which rule (the API's error code), `reason` why."""

    code = "refused"

    @property
    def reason(self) -> str:
        """One line for a reply or an API answer."""
        return str(self)


class TargetRefused(StartRefused):
    """The target branch is not one changes may target, or does not exist (`code` says which;
    `project_not_found`: nor does the project, as far as the bot's account can see)."""

    def __init__(self, reason: str, code: str = "target_branch_not_allowed") -> None:
        super().__init__(reason)
        self.code = code


class PolicyInvalid(StartRefused):
    """The target branch's policy file cannot be used: new changes are refused."""

    code = "policy_invalid"

    def __init__(self, error: PolicyError, sha: str) -> None:
        super().__init__(str(error))
        self.problems = [str(problem) for problem in error.problems]
        self.sha = sha

    @property
    def first(self) -> str:
        """The first problem as `file:line:col: message`."""
        return self.problems[0]

    @property
    def reason(self) -> str:
        """One line for a reply or an API answer."""
        return f"the project's policy file refuses new changes: {self.first}"


@dataclass(frozen=True, slots=True)
class Recorded:
    """The policy a new change starts with: the target's head commit it was read at (None: not
    read) and the file."""

    sha: str | None
    policy: Policy
    present: bool = False

    def as_json(self) -> dict[str, Any] | None:
        """What operations.policy records (None: no file, the environment's settings)."""
        return self.policy.to_json() if self.present else None


NOT_READ = Recorded(None, Policy())


def read_at_start(services: Services, project: str, branch: str) -> Recorded:
    """The target branch resolved and allowed, and the policy at its head commit: two GitLab
    reads (the branch, the file at its commit; one with policy files off). Raises TargetRefused
    for a branch changes may not target, PolicyInvalid for a broken or loosening file; GitLab
    being unavailable raises its error (the caller answers "try again")."""
    if services.clients is None:
        return NOT_READ  # these services cannot read GitLab (tests of the store alone)
    settings = services.settings
    gl_project = services.clients.author.project(project)
    try:
        head = read_branch(gl_project, branch)
    except NoSuchProject:
        why = f"GitLab shows the bot no project {project}"
        raise TargetRefused(why, "project_not_found") from None
    except NoSuchBranch:
        raise TargetRefused(
            f"{project} has no branch {branch}", "target_branch_not_found"
        ) from None
    _allowed(settings, head)
    if not settings.policy_files:
        return Recorded(head.sha, Policy())
    try:
        content = read_file_at(gl_project, POLICY_PATH, head.sha)
    except GitLabError as exc:
        log.warning("policy file could not be read: %s", exc, extra={"project": project})
        raise
    if content is None:
        return Recorded(head.sha, Policy())
    try:
        policy = parse_checked(content, POLICY_PATH, limits_of(services))
    except PolicyError as exc:
        log.info("policy file refused: %s", exc, extra={"project": project, "sha": head.sha})
        raise PolicyInvalid(exc, head.sha) from None
    _allowed(settings, head, policy.target_branches)
    return Recorded(head.sha, policy, present=True)


def _allowed(settings: Settings, head: BranchHead, repository: Sequence[str] | None = None) -> None:
    """Raises TargetRefused unless changes may target the branch `head` describes."""
    why = branches.refusal(
        head.name,
        protected=head.protected,
        default=head.default,
        operator=settings.target_branches,
        repository=repository,
    )
    if why is not None:
        raise TargetRefused(why)


#: The poll kinds a policy file may set tiers for (the `poll.<kind>_tiers` flags).
POLL_KINDS = ("pipeline", "rebase", "pending", "covered", "covered_rebase", "merge", "train")


def limits_from(
    settings: Settings, flags: Mapping[str, Any], approver_accounts: int | None = None
) -> Limits:
    """The server's values a policy file is held to, from the settings and the flags' values
    (`approver_accounts`: how many approval bots there are; None: GITOPS_APPROVER_TOKENS's)."""
    levels = flags.get("commands.min_access")
    if approver_accounts is None:
        approver_accounts = len(settings.approver_tokens)
    return Limits(
        min_access=dict(levels) if isinstance(levels, Mapping) else {},
        approver_accounts=approver_accounts,
        approvals_required=settings.approvals_required,
        tiers={kind: flags[f"poll.{kind}_tiers"] for kind in POLL_KINDS},
        deploy_timeout=settings.deploy_timeout,
        workflow_order=str(flags.get("workflow.order")),
    )


def limits_of(services: Services) -> Limits:
    """The server's values now (the flags read from the database, the approval bots built)."""
    accounts = None if services.clients is None else len(services.clients.approvers)
    return limits_from(services.settings, all_flags(services.engine), accounts)


def parse_checked(text: str | bytes, filename: str, limits: Limits) -> Policy:
    """The policy the file states, refusing what the schema refuses (parse_policy) and every key
    that would loosen the server's values (`limits`; bot/policy/tighten.py), a `paths.allowed`
    entry naming a built-in protected path among them. PolicyError names file:line:col for
    each problem."""
    policy = parse_policy(text, filename)
    problems = loosening(text, policy, filename, limits)
    if problems:
        raise PolicyError(problems)
    return policy


def loosening(text: str | bytes, policy: Policy, filename: str, limits: Limits) -> list[Problem]:
    """The entries of a parsed file that would loosen the server's values, each at its line and
    column (the file is composed again only when there is one: it parsed, so it is small and
    holds no alias)."""
    found: list[tuple[tuple[Any, ...], str]] = [
        (
            ("paths", "allowed", i),
            f"{entry!r} would allow the protected path {zone}; a policy file may only narrow "
            "the allowed paths (GITOPS_ALLOWED_PATHS alone can allow a protected path)",
        )
        for i, entry in enumerate(policy.paths.allowed or ())
        if (zone := unlocks(entry))
    ]
    found += loosenings(policy, limits)
    if not found:
        return []
    source = text.decode("utf-8") if isinstance(text, bytes) else text
    root = yaml.compose(source, Loader=yaml.SafeLoader)
    problems = [
        Problem(filename, *yaml_position(root, where), f"{_key(where)}: {message}")
        for where, message in found
    ]
    return sorted(problems, key=lambda p: (p.line, p.column))  # in the file's order


def _key(where: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in where)


def of(op: OperationRow) -> Policy:
    """The policy recorded on the operation (the defaults when none was)."""
    return Policy.from_json(op.policy)


def allowed_paths(settings: Settings, policy: Policy) -> tuple[str, ...]:
    """The paths changes may touch: GITOPS_ALLOWED_PATHS narrowed by the file's `paths.allowed`
    (a path must be under both; bot/core/path_policy.py `narrowed`)."""
    return narrowed(settings.allowed_paths, policy.paths.allowed)


def unlocking_paths(settings: Settings) -> tuple[str, ...]:
    """The entries that may explicitly allow a protected path: the operator's alone."""
    return settings.allowed_paths


def deploy_timeout(settings: Settings, policy: Policy) -> int:
    """Seconds a merged change waits for the deployment's word: the file's `deploy.timeout` when
    it is shorter, else GITOPS_DEPLOY_TIMEOUT."""
    return min(policy.deploy.timeout or settings.deploy_timeout, settings.deploy_timeout)


def poll_tiers(policy: Policy, name: str, server: Sequence[Sequence[int]]) -> list[list[int]]:
    """The tiers a wait polls by: the file's `poll.<name>_tiers` when they are within the
    server's (`server`, the flag's: polling no more often, stopping no later), else the flag's."""
    tiers = getattr(policy.poll, f"{name}_tiers", None)
    if tiers is None or tiers_within(tiers, server) is not None:
        return [list(tier) for tier in server]
    return [list(tier) for tier in tiers]


def approver_accounts(
    accounts: Sequence[Account], policy: Policy, required: int | None = None
) -> list[Account]:
    """The approval bots that approve the change: the first `required` of GITOPS_APPROVER_TOKENS
    (GITOPS_APPROVALS_REQUIRED; None: all of them), or those whose usernames the file's
    `approvals.approvers` lists, at least as many as required and as the file's
    `approvals.required`. Raises CannotProceed naming the policy file when the accounts it names
    are fewer than that (reading a username is one GET /user per account, once)."""
    wanted = len(accounts) if required is None else min(required, len(accounts))
    wanted = max(wanted, policy.approvals.required or 0)
    chosen = list(accounts)
    named = policy.approvals.approvers
    if named is not None:
        chosen = [account for account in chosen if account.username() in named]
    if len(chosen) < wanted:
        if named is None:
            raise CannotProceed(
                f"the policy file asks for {wanted} approvals; {len(chosen)} approver accounts "
                "are configured (GITOPS_APPROVER_TOKENS)"
            )
        raise CannotProceed(
            f"the policy file's approvals.approvers ({', '.join(named)}) matches {len(chosen)} "
            f"of the approver accounts (GITOPS_APPROVER_TOKENS); {wanted} approvals are required"
        )
    return chosen[:wanted]


def command_rules(policy: Policy, levels: Mapping[str, object], author_may: list[str]) -> Rules:
    """Who may run each MR command: the flag's levels (the built-in defaults for verbs it leaves
    out), each raised to the file's level when the file asks for more; never lowered."""
    base = rules_from(levels, author_may)
    raised = dict(base.min_access)
    for name, level in policy.min_access().items():
        verb = Verb(name)
        raised[verb] = max(raised.get(verb, level), level)
    return replace(base, min_access=raised)
