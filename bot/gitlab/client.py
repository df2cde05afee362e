"""Construction: one python-gitlab client per GitLab identity, which never retries nor sleeps.

The author bot and each approval bot are an `Account`; `account.project(id)` names a project as
that account sees it (no call is made). Retries and waits are the caller's scheduled jobs, so the
client is built with `retry_transient_errors=False` and a transport that turns 429 into
`RateLimited` itself (python-gitlab would otherwise sleep on 429, and its error drops the
Retry-After header).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import gitlab
from gitlab._backends.requests_backend import RequestsBackend, RequestsResponse

from bot.config import Settings
from bot.gitlab.calls import get_json
from bot.gitlab.errors import GitLabUnavailable, RateLimited, parse_retry_after, register_secret
from bot.heartbeat import beat

#: Seconds each GitLab call may take (connect and each read); a slower answer is a timeout.
#: The accounts take theirs from the settings (GITOPS_GITLAB_TIMEOUT), whose default this is.
DEFAULT_TIMEOUT = Settings.gitlab_timeout


class NoWaitBackend(RequestsBackend):
    """python-gitlab's requests transport, except that 429 raises at once instead of sleeping."""

    def http_request(self, *args: Any, **kwargs: Any) -> RequestsResponse:
        """Sends the request; a 429 becomes `RateLimited` carrying Retry-After (or None).

        Every GitLab call passes here, so the running step's heartbeat renews its lease here
        first (and stops the step with LeaseLost when another worker holds it now)."""
        beat()
        result = super().http_request(*args, **kwargs)
        if result.status_code == 429:
            response = result.response
            raise RateLimited(
                f"{response.request.method} {response.request.path_url.split('?')[0]}: "
                "GitLab answered 429 (rate limited)",
                status_code=429,
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        return result


def make_client(url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT) -> gitlab.Gitlab:
    """Builds a python-gitlab client for one token: bounded timeout, no retries, no sleeping."""
    register_secret(token)
    return gitlab.Gitlab(
        url,
        private_token=token,
        timeout=timeout,
        retry_transient_errors=False,
        backend=NoWaitBackend,
    )


@dataclass(eq=False)
class Account:
    """One GitLab identity (the author bot, or one approval bot) and what we know about it."""

    gl: gitlab.Gitlab = field(repr=False)
    #: a name for logs ("author", "approver-1"); never the token
    label: str = "author"
    _username: str | None = field(default=None, repr=False)

    def username(self) -> str:
        """This account's username, read once with GET /user and then cached here."""
        if self._username is None:
            data = get_json(self.gl, "/user", what=f"{self.label}: read the current user")
            username = data.get("username")
            if not isinstance(username, str) or not username:
                raise GitLabUnavailable(f"{self.label}: GET /user answered without a username")
            self._username = username
        return self._username

    def project(self, project_id: int | str) -> Project:
        """Names a project (numeric id or full path) as this account sees it; no call is made."""
        return Project(self, project_id)


@dataclass(frozen=True)
class Project:
    """A project seen through one account: every operation's first argument."""

    account: Account
    id: int | str

    @property
    def path(self) -> str:
        """The API path of the project, the id URL-encoded (`group/app` -> `group%2Fapp`)."""
        return f"/projects/{quote(str(self.id), safe='')}"

    def mr_path(self, iid: int) -> str:
        """The API path of one merge request of this project."""
        return f"{self.path}/merge_requests/{int(iid)}"

    @property
    def gl(self) -> gitlab.Gitlab:
        """The python-gitlab client of the account this project is seen through."""
        return self.account.gl


def author_account(settings: Settings) -> Account:
    """The author bot (GITOPS_GITLAB_TOKEN): creates branches, commits, MRs and comments."""
    return Account(
        make_client(settings.gitlab_url, settings.gitlab_token, timeout=settings.gitlab_timeout)
    )


def approver_accounts(settings: Settings) -> list[Account]:
    """The approval bots (GITOPS_APPROVER_TOKENS, in order): each approves on its own."""
    timeout = settings.gitlab_timeout
    return [
        Account(make_client(settings.gitlab_url, token, timeout=timeout), f"approver-{n}")
        for n, token in enumerate(settings.approver_tokens, start=1)
    ]
