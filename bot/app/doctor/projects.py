"""The checks of each managed project, through the bot's own tokens: the author's access and
merge right, the approvers' access, the bot's webhook and the protection of `gitops/*`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.app.doctor.checklist import (
    DEVELOPER,
    MISS,
    OK,
    SKIPPED,
    Check,
    Identity,
    access_fix,
    level_text,
)
from bot.app.hooks import EVENTS
from bot.gitlab import GitLabError, default_branch, list_hooks, member_access_level
from bot.gitlab.protection import (
    BOT_BRANCHES,
    MAINTAINERS,
    judge,
    list_protection,
    merge_right,
    read_protection,
)


@dataclass(frozen=True)
class Membership:
    """An account's access level on a project, read through its own token."""

    who: Identity
    #: None: not a member
    level: int | None
    #: why the read failed (then `level` says nothing)
    error: str | None = None

    @property
    def developer(self) -> bool:
        """At least Developer: may push, open MRs, approve."""
        return self.error is None and (self.level or 0) >= DEVELOPER

    @property
    def text(self) -> str:
        """`author @gitops-bot Maintainer (40)`."""
        found = self.error or level_text(self.level)
        return f"{self.who.label} @{self.who.username} {found}"


def read_membership(project: str, who: Identity) -> Membership:
    """The account's effective access level on the project (one GET through its token)."""
    try:
        return Membership(who, member_access_level(who.account.project(project), who.user_id))
    except GitLabError as exc:
        return Membership(who, None, str(exc))


def check_access(project: str, author: Membership | None) -> Check:
    """The author account is at least Developer on the project (it pushes and opens MRs)."""
    name = f"access {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the membership with")
    if author.error is not None:
        return Check(name, MISS, author.text, access_fix(project))
    if not author.developer:
        return Check(
            name,
            MISS,
            author.text,
            f"make @{author.who.username} Developer or more on {project} (Project information "
            "> Members): the author pushes branches and opens MRs",
        )
    return Check(name, OK, author.text)


def check_merge(project: str, author: Membership | None, branches: Sequence[str]) -> Check:
    """The author may merge into each branch it will merge to there (the project's default
    branch and those requests name): GitLab's protected branches (merge or push allowed to its
    user or to a role it has) against its access level."""
    name = f"merge {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the protected branches with")
    if not author.developer:
        return Check(name, SKIPPED, f"@{author.who.username} is not Developer: see access")
    who = author.who
    gitlab_project = who.account.project(project)
    try:
        default = default_branch(gitlab_project)
        rules = list_protection(gitlab_project)
    except GitLabError as exc:
        return Check(
            name,
            MISS,
            f"cannot read the protected branches as @{who.username}: {exc}",
            access_fix(project),
        )
    targets = sorted({*([default] if default else []), *branches})
    if not targets:
        return Check(name, SKIPPED, "no target branch: the repository is empty, none requested")
    rights = {branch: merge_right(rules, branch, who.user_id, author.level) for branch in targets}
    detail = "; ".join(right.text for right in rights.values())
    refused = [branch for branch, right in rights.items() if right.verdict == "no"]
    if refused:
        return Check(
            name,
            MISS,
            f"@{who.username}, {level_text(author.level)}, may not merge into "
            f"{', '.join(refused)}: {detail}",
            f"let @{who.username} merge into {', '.join(refused)} on {project}: add it (or a "
            'role it has) to the rule\'s "Allowed to merge" (Settings > Repository > Protected '
            "branches), or make it Maintainer where Maintainers may merge",
        )
    if any(right.verdict == "unknown" for right in rights.values()):
        return Check(
            name, SKIPPED, f"only a group may let @{who.username} merge (not read): {detail}"
        )
    return Check(name, OK, f"@{who.username} may merge: {detail}")


def check_approve(project: str, approvers: Sequence[Membership], author: Identity | None) -> Check:
    """Each approver can approve the author's MRs there: at least Developer, and not the author
    account (an MR's author approving it does not count)."""
    name = f"approve {project}"
    if not approvers:
        return Check(name, SKIPPED, "no valid approver token to read memberships with")
    clashes = [m for m in approvers if author is not None and m.who.user_id == author.user_id]
    judged = [m for m in approvers if m not in clashes]
    found = [m.text for m in judged] + [
        f"{m.who.label} is the author account (see distinct users)" for m in clashes
    ]
    errors = [m for m in judged if m.error is not None]
    if errors:
        return Check(name, MISS, "; ".join(found), access_fix(project))
    short = [f"@{m.who.username}" for m in judged if not m.developer]
    if short:
        return Check(
            name,
            MISS,
            "; ".join(found),
            f"make {', '.join(short)} Developer or more on {project} (Project information > "
            "Members): approvers approve the author's MRs",
        )
    if clashes:  # distinct users misses for it: one fault, one miss
        return Check(name, SKIPPED, "; ".join(found))
    return Check(name, OK, "; ".join(found))


def check_hook(author: Identity | None, project: str, url: str, now: datetime) -> Check:
    """The project has a hook to the bot's receiver, enabled, with the four events."""
    name = f"hook {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the hooks with")
    install = f"gitops-bot hooks install {project}"
    try:
        hooks = list_hooks(author.account.project(project))
    except GitLabError as exc:
        return Check(
            name,
            MISS,
            f"cannot list the hooks as @{author.username}: {exc}",
            f"make @{author.username} Maintainer on {project} (listing hooks needs it), "
            f"then `{install}`",
        )
    ours = [hook for hook in hooks if hook.url.rstrip("/") == url]
    if not ours:
        return Check(name, MISS, f"no hook to {url}", install)
    hook = ours[0]
    if hook.disabled(now):
        return Check(
            name,
            MISS,
            f"GitLab stopped sending to hook #{hook.id} ({hook.alert_status or 'disabled'})",
            "fix the receiver, then send a test event from the project's webhook settings "
            "(GitLab re-enables a hook after a successful test)",
        )
    lacking = [event for event in EVENTS if event not in hook.events]
    if lacking:
        return Check(
            name,
            MISS,
            f"hook #{hook.id} to {url} lacks {', '.join(lacking)}",
            f"{install} (sets the events)",
        )
    return Check(name, OK, f"hook #{hook.id} to {url}, enabled, {', '.join(EVENTS)}")


def check_protection(author: Identity | None, project: str) -> Check:
    """`gitops/*` is protected as `gitops-bot hooks install` sets it (protection.judge)."""
    name = f"protection {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the rule with")
    try:
        verdict = judge(read_protection(author.account.project(project)), author.user_id)
    except GitLabError as exc:
        return Check(name, MISS, f"cannot read {BOT_BRANCHES}: {exc}", access_fix(project))
    if not verdict.ok:
        return Check(
            name,
            MISS,
            f"{BOT_BRANCHES}: {verdict.text}",
            f"gitops-bot hooks install {project}",
        )
    if verdict.mode == MAINTAINERS:
        detail = f"{BOT_BRANCHES}: Maintainers push and merge (the CE fallback)"
        return Check(name, OK, detail)
    return Check(name, OK, f"{BOT_BRANCHES}: only @{author.username} pushes and merges")


#: GitLab's Maintainer access level: deleting a protected branch needs it.
MAINTAINER_LEVEL = 40


def check_branch_cleanup(project: str, author: Membership | None) -> Check:
    """The author may delete the bot's merged `gitops/*` branches: they are protected, GitLab
    never removes a protected source branch on merge, and deleting one needs Maintainer
    (lib/gitlab/checks/branch_check.rb; app/services/branches/delete_service.rb)."""
    name = f"delete merged branches {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read its access with")
    who = author.who
    if author.level is not None and author.level >= MAINTAINER_LEVEL:
        return Check(name, OK, f"@{who.username} is {level_text(author.level)}")
    return Check(
        name,
        MISS,
        f"@{who.username}, {level_text(author.level)}, may not delete protected branches: "
        "every merged gitops/* branch is kept",
        f"make @{who.username} Maintainer of {project}, or delete merged gitops/* branches "
        "yourself",
    )
