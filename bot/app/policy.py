"""The repository policy (`.gitops/bot.yml`) a change follows: read once when it starts, at the
target branch's head, and recorded on it; every later step reads what was recorded (`of`), never
the file again, so a policy changed mid-flight alters only the changes that start after it.

What the file leaves out comes from the environment: GITOPS_ALLOWED_PATHS, the flags. What it
sets may tighten the environment, never loosen it:

- `paths.allowed` narrows GITOPS_ALLOWED_PATHS (a path must be allowed by both), and may name
  no built-in protected path (`.gitlab-ci.yml`, `.gitlab/`, CODEOWNERS, `.gitattributes`, the
  policy file). A file that does is refused like any broken file, with the entry's
  file:line:col (`parse_checked`, used when a change starts and by `gitops-bot policy check`),
  rather than read with the entry ignored: an entry that cannot mean what it says is a mistake
  or an attack, and a refusal says so where it is written, before any change follows it; an
  ignored entry would only show on the changes it silently did not allow.
- `commands.min_access` raises a verb's level, never lowers it below the `commands.min_access`
  flag's (or the built-in default): a lower level in the file is not an error (the flag is the
  operator's and may change), it just does not count.
- `approvals` picks among the configured approver accounts, never adds one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from bot.config import Settings
from bot.core.commands import Rules, Verb, rules_from
from bot.core.path_policy import narrowed, unlocks
from bot.core.states import Flow
from bot.errors import CannotProceed
from bot.gitlab import Account, GitLabError
from bot.gitlab.policy_file import NoSuchBranch, read_file_at_head
from bot.policy import POLICY_PATH, Policy, PolicyError, parse_policy
from bot.policy.parse import Problem, yaml_position
from bot.services import Services
from bot.store.operations import OperationRow

log = logging.getLogger(__name__)


class PolicyInvalid(Exception):
    """The target branch's policy file cannot be used: new changes are refused."""

    def __init__(self, error: PolicyError, sha: str) -> None:
        super().__init__(str(error))
        self.problems = [str(problem) for problem in error.problems]
        self.sha = sha

    @property
    def first(self) -> str:
        """The first problem as `file:line:col: message`."""
        return self.problems[0]


@dataclass(frozen=True, slots=True)
class Recorded:
    """The policy a new change starts with: the commit read (None: not read) and the file."""

    sha: str | None
    policy: Policy
    present: bool = False

    def as_json(self) -> dict[str, Any] | None:
        """What operations.policy records (None: no file, the environment's settings)."""
        return self.policy.to_json() if self.present else None


NOT_READ = Recorded(None, Policy())


def read_at_start(services: Services, project: str, branch: str) -> Recorded:
    """The policy at the head of `branch` (one GitLab read, with or without a file; two only
    when GitLab's 404 does not say whether the file or the branch is missing). Raises
    PolicyInvalid for a broken file; GitLab being unavailable raises its error (the caller
    answers "try again")."""
    if not services.settings.policy_files or services.clients is None:
        return NOT_READ  # policy files are off, or these services cannot read GitLab
    account = services.clients.author
    try:
        found = read_file_at_head(account.project(project), POLICY_PATH, branch)
    except NoSuchBranch:
        return NOT_READ  # nothing to read; the change itself reports the missing branch
    except GitLabError as exc:
        log.warning("policy file could not be read: %s", exc, extra={"project": project})
        raise
    if found.content is None:
        return Recorded(found.sha, Policy())
    try:
        policy = parse_checked(found.content, POLICY_PATH)
    except PolicyError as exc:
        log.info("policy file refused: %s", exc, extra={"project": project, "sha": found.sha})
        raise PolicyInvalid(exc, found.sha) from None
    return Recorded(found.sha, policy, present=True)


def parse_checked(text: str | bytes, filename: str = POLICY_PATH) -> Policy:
    """The policy the file states, refusing what the schema refuses (parse_policy) and what
    would loosen the operator's environment: a `paths.allowed` entry naming a built-in
    protected path. PolicyError names file:line:col for each problem."""
    policy = parse_policy(text, filename)
    problems = loosening(text, policy, filename)
    if problems:
        raise PolicyError(problems)
    return policy


def loosening(text: str | bytes, policy: Policy, filename: str = POLICY_PATH) -> list[Problem]:
    """The entries of a parsed file that would loosen the environment, each at its line and
    column (the file is composed again only when there is one: it parsed, so it is small and
    holds no alias)."""
    found = [
        (i, entry, zone)
        for i, entry in enumerate(policy.paths.allowed or ())
        if (zone := unlocks(entry))
    ]
    if not found:
        return []
    source = text.decode("utf-8") if isinstance(text, bytes) else text
    root = yaml.compose(source, Loader=yaml.SafeLoader)
    problems = []
    for index, entry, zone in found:
        line, column = yaml_position(root, ("paths", "allowed", index))
        message = (
            f"paths.allowed.{index}: {entry!r} would allow the protected path {zone}; a policy "
            "file may only narrow the allowed paths (GITOPS_ALLOWED_PATHS alone can allow a "
            "protected path)"
        )
        problems.append(Problem(filename, line, column, message))
    return problems


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


def flow(policy: Policy, default: Flow) -> Flow:
    """The step order of an API submission: the file's, else the `workflow.order` flag."""
    return policy.workflow.order or default


def deploy_timeout(settings: Settings, policy: Policy) -> int:
    """Seconds a merged change waits for the deployment's word: the file's `deploy.timeout`,
    else GITOPS_DEPLOY_TIMEOUT."""
    return policy.deploy.timeout or settings.deploy_timeout


def poll_tiers(policy: Policy, name: str) -> list[list[int]] | None:
    """The file's `poll.<name>_tiers` ([[interval_seconds, polls], ...]); None: the flag's."""
    tiers = getattr(policy.poll, f"{name}_tiers", None)
    return None if tiers is None else [list(tier) for tier in tiers]


def approver_accounts(accounts: Sequence[Account], policy: Policy) -> list[Account]:
    """The approval bots that approve the change: those of GITOPS_APPROVER_TOKENS whose GitLab
    usernames the file's `approvals.approvers` lists (all when it lists none), the first
    `approvals.required` of them when it says how many. Raises CannotProceed when the file asks
    for more than that leaves (reading a username is one GET /user per account, once)."""
    chosen = list(accounts)
    named = policy.approvals.approvers
    if named is not None:
        chosen = [account for account in chosen if account.username() in named]
    required = policy.approvals.required
    if required is not None:
        if len(chosen) < required:
            raise CannotProceed(
                f"the policy file asks for {required} approvals from the approver accounts "
                f"{', '.join(named) if named is not None else 'configured'}; "
                f"{len(chosen)} of them are configured (GITOPS_APPROVER_TOKENS)"
            )
        chosen = chosen[:required]
    return chosen


def command_rules(policy: Policy, levels: Mapping[str, object], author_may: list[str]) -> Rules:
    """Who may run each MR command: the flag's levels (the built-in defaults for verbs it leaves
    out), each raised to the file's level when the file asks for more; never lowered."""
    base = rules_from(levels, author_may)
    raised = dict(base.min_access)
    for name, level in policy.min_access().items():
        verb = Verb(name)
        raised[verb] = max(raised.get(verb, level), level)
    return replace(base, min_access=raised)
