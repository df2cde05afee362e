"""The checks of GitLab and the bot's accounts on it: GitLab answers, each token is valid with
the scope it needs, and the author and the approvers are different users."""

from __future__ import annotations

from collections.abc import Sequence

from bot.app.doctor.checklist import MISS, OK, SCOPE, SKIPPED, Check, Identity, token_variable
from bot.config import Settings
from bot.gitlab import Account, GitLabError, Unauthorized, server_version, token_scopes
from bot.gitlab.protection import author_identity


def check_gitlab(settings: Settings, author: Account) -> Check:
    """GitLab answers GET /version (a 401 still shows it is there: the token checks say more)."""
    try:
        version = server_version(author)
    except Unauthorized:
        return Check("gitlab", OK, f"{settings.gitlab_url} answers (401 to this token)")
    except GitLabError as exc:
        if exc.status_code is not None and exc.status_code < 500:
            return Check("gitlab", OK, f"{settings.gitlab_url} answers ({exc.status_code})")
        return Check(
            "gitlab",
            MISS,
            f"{settings.gitlab_url} does not answer: {exc}",
            "check GITOPS_GITLAB_URL (the instance's base URL, without /api/v4) and the network",
        )
    return Check("gitlab", OK, f"{settings.gitlab_url}, GitLab {version}")


def check_token(label: str, account: Account, token: str) -> tuple[Check, Identity | None]:
    """The token is valid (GET /user) and has the `api` scope where GitLab shows scopes."""
    name = f"token {label}"
    where = token_variable(label)
    if not token:
        return Check(name, MISS, f"{where} is not set", f"set {where}"), None
    try:
        user_id, username = author_identity(account)
    except GitLabError as exc:
        return Check(
            name,
            MISS,
            f"GitLab does not accept the token: {exc}",
            f"create a personal access token with scope `{SCOPE}` for the {label} account "
            f"and set it in {where}",
        ), None
    who = Identity(label, account, user_id, username)
    try:
        scopes = token_scopes(account)
    except GitLabError as exc:
        return Check(name, MISS, f"@{username}: cannot read the token's scopes: {exc}"), who
    if scopes is None:
        detail = f"@{username} (#{user_id}); GitLab does not show this token's scopes"
        return Check(name, OK, detail), who
    if SCOPE not in scopes:
        return Check(
            name,
            MISS,
            f"@{username}: the token's scopes are {', '.join(scopes) or '(none)'}, not `{SCOPE}`",
            f"create a token with scope `{SCOPE}` for @{username} and set it in {where}",
        ), who
    return Check(name, OK, f"@{username} (#{user_id}), scopes {', '.join(scopes)}"), who


def check_distinct(identities: Sequence[Identity]) -> Check:
    """The author and each approver are different GitLab users."""
    if not identities:
        return Check("distinct users", SKIPPED, "no valid token to compare")
    seen: dict[int, str] = {}
    clashes = []
    for who in identities:
        if who.user_id in seen:
            clashes.append(f"{who.label} is @{who.username}, as {seen[who.user_id]} is")
        else:
            seen[who.user_id] = who.label
    if clashes:
        return Check(
            "distinct users",
            MISS,
            "; ".join(clashes),
            "give each account its own GitLab user: GitLab counts one approval per user, and "
            "an MR's author approving it does not count",
        )
    names = ", ".join(f"{who.label} @{who.username}" for who in identities)
    return Check("distinct users", OK, names)
