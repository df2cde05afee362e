"""The checklist's parts: a `Check` (one line), the statuses, a bot account whose token GitLab
accepted (`Identity`), and the words the checks share."""

from __future__ import annotations

from dataclasses import dataclass

from bot.gitlab import Account

OK, MISS, SKIPPED = "ok", "miss", "skipped"
#: GitLab's access levels by number, as its settings pages name them
LEVELS = {10: "Guest", 20: "Reporter", 30: "Developer", 40: "Maintainer", 50: "Owner"}
#: Pushing a branch, opening an MR (the author) and approving one (an approver) need Developer.
DEVELOPER = 30
#: The token scope every bot account needs: the REST API, read and write.
SCOPE = "api"


@dataclass(frozen=True)
class Check:
    """One line of the checklist."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def as_json(self) -> dict[str, str]:
        """The check for scripts."""
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class Identity:
    """A bot account whose token GitLab accepted."""

    label: str
    account: Account
    user_id: int
    username: str


def token_variable(label: str) -> str:
    """The variable holding an account's token."""
    if label == "author":
        return "GITOPS_GITLAB_TOKEN"
    return f"GITOPS_APPROVER_TOKENS (entry {label.removeprefix('approver-')})"


def level_text(level: int | None) -> str:
    """`Maintainer (40)`, or `no access`."""
    return "no access" if level is None else f"{LEVELS.get(level, 'level')} ({level})"


def access_fix(project: str) -> str:
    """The fix for a project GitLab would not show an account."""
    return f"check that {project} exists and that each bot account is a member of it"
