"""The approve component: one approve call, two implementations picked per call.

`python-gitlab` calls `mr.approve(sha=...)`; `direct` POSTs `{sha, check_items}` itself, with the
check items read from a configuration endpoint and cached per project. A 422 whose body lists
`check_items` refreshes the cache, and the direct call is rebuilt from that list and sent once
more at once. Both raise the same errors (`bot.gitlab.errors`) with GitLab's real status code,
so `approve_once` treats 401/304/409 the same whichever implementation ran.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from bot.approval.backoff import backoff
from bot.gitlab.calls import get_any, post_json
from bot.gitlab.client import Account, Project
from bot.gitlab.errors import (
    GitLabConflict,
    GitLabError,
    GitLabRefused,
    GitLabUnavailable,
    NotFound,
    NotModified,
    Unprocessable,
    translating,
)
from bot.gitlab.reads import approved_by

log = logging.getLogger(__name__)

#: The configuration endpoint listing the check items an approve must acknowledge, under the
#: GitLab API URL (our design's endpoint, not GitLab's); `{project}` is the URL-encoded id.
DEFAULT_CHECK_ITEMS_PATH = "/projects/{project}/approval_check_items"


class ApproveImpl(StrEnum):
    """Which implementation of the approve call runs (a dynamic flag, read per call)."""

    PYTHON_GITLAB = "python-gitlab"
    DIRECT = "direct"


def _items_from(body: Any) -> tuple[str, ...] | None:
    """The check items a 422 body (or the configuration endpoint) lists; None when it lists none."""
    items = body.get("check_items") if isinstance(body, dict) else body
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        return None
    return tuple(items)


class ApproveComponent:
    """Approves an MR as one account, through the implementation named on each call."""

    def __init__(self, check_items_path: str = DEFAULT_CHECK_ITEMS_PATH) -> None:
        if not check_items_path.startswith("/"):
            # a path under the GitLab API only: the account's token must not go to another host
            raise ValueError("check_items_path must be an API path starting with '/'")
        self.check_items_path = check_items_path
        self._check_items: dict[str, tuple[str, ...]] = {}

    def check_items(self, account: Account, project_id: int | str) -> tuple[str, ...]:
        """The project's check items: cached, else read once from the configuration endpoint.

        Fail-open: a failed read sends no items (not cached); a 422 then tells us the real list.
        """
        key = str(project_id)
        cached = self._check_items.get(key)
        if cached is not None:
            return cached
        path = self.check_items_path.format(project=quote(key, safe=""))
        try:
            items = _items_from(get_any(account.gl, path, what="read approval check items"))
        except NotFound:
            items = ()  # the endpoint is not there: nothing to acknowledge
        except GitLabError as err:
            log.warning(
                "check items unreadable; approving without them",
                extra={"gitlab_project": key, "status_code": err.status_code},
            )
            return ()
        self._check_items[key] = items or ()
        return self._check_items[key]

    def remember(self, project_id: int | str, items: tuple[str, ...]) -> None:
        """Replaces the cached check items of a project (what a 422 said is now in effect)."""
        self._check_items[str(project_id)] = items

    def approve(
        self,
        account: Account,
        project_id: int | str,
        iid: int,
        sha: str,
        *,
        impl: ApproveImpl | str = ApproveImpl.PYTHON_GITLAB,
    ) -> None:
        """Approves MR `iid` pinned to `sha` as `account`; raises our errors on any refusal."""
        match ApproveImpl(impl):
            case ApproveImpl.PYTHON_GITLAB:
                self._approve_python_gitlab(account, project_id, iid, sha)
            case ApproveImpl.DIRECT:
                self._approve_direct(account, project_id, iid, sha)

    def _approve_python_gitlab(
        self, account: Account, project_id: int | str, iid: int, sha: str
    ) -> None:
        mr = account.gl.projects.get(project_id, lazy=True).mergerequests.get(iid, lazy=True)
        try:
            with translating(f"{account.label}: approve !{iid}", mutating=True):
                mr.approve(sha=sha)
        except Unprocessable as err:
            items = _items_from(err.body)
            if items is not None:
                # this implementation cannot send them; keep them for the direct one
                self.remember(project_id, items)
            raise

    def _approve_direct(self, account: Account, project_id: int | str, iid: int, sha: str) -> None:
        path = f"/projects/{quote(str(project_id), safe='')}/merge_requests/{int(iid)}/approve"
        what = f"{account.label}: approve !{iid} (direct)"
        items = self.check_items(account, project_id)
        try:
            post_json(account.gl, path, what=what, data={"sha": sha, "check_items": list(items)})
        except Unprocessable as err:
            fresh = _items_from(err.body)
            if fresh is None or fresh == items:
                raise  # not about check items (or the same ones): sending again cannot help
            # GitLab says which items are in effect now: rebuild from them and send once more
            self.remember(project_id, fresh)
            log.info(
                "approve check items changed; retrying once",
                extra={"gitlab_project": str(project_id), "mr_iid": iid, "items": list(fresh)},
            )
            post_json(account.gl, path, what=what, data={"sha": sha, "check_items": list(fresh)})


class ApproveOutcome(StrEnum):
    """What one approve attempt by one account came to, and so what the caller does next."""

    APPROVED = "approved"  # this attempt approved (or found its ambiguous refusal was a repeat)
    ALREADY = "already"  # the account had approved before: nothing was sent
    RETRY = "retry"  # not yet: schedule attempt + 1 after `retry_in` seconds
    HEAD_MOVED = "head_moved"  # 409: the MR's head is not `sha` any more; re-check the new head
    FAILED = "failed"  # refused for good, or out of attempts (approvals read once more first)


@dataclass(frozen=True)
class ApproveResult:
    """The outcome of `approve_once`, with GitLab's status code and a short reason."""

    outcome: ApproveOutcome
    retry_in: float | None = None
    status_code: int | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        """True when this account's approval is in place."""
        return self.outcome in (ApproveOutcome.APPROVED, ApproveOutcome.ALREADY)


#: Refusals worth another attempt: 401/304 may be a repeat; 422 may be check items (flag flip).
_RETRYABLE_REFUSALS = frozenset({401, 304, 422})


def _has_approved(account: Account, project: Project, iid: int) -> bool:
    """Whether `account` is among the MR's approvers; fail-open: a failed read means "not yet"."""
    try:
        return account.username() in approved_by(project, iid)
    except GitLabError as err:
        log.warning(
            "approvals unreadable; treated as not approved",
            extra={"account": account.label, "mr_iid": iid, "status_code": err.status_code},
        )
        return False


def approve_once(
    account: Account,
    project: Project | int | str,
    iid: int,
    sha: str,
    attempt: int,
    max_retries: int,
    *,
    component: ApproveComponent,
    impl: ApproveImpl | str = ApproveImpl.PYTHON_GITLAB,
    approvers: frozenset[str] | None = None,
) -> ApproveResult:
    """One approve attempt (number `attempt`, from 0) by one account; never waits.

    Reads first whether this account already approved (then nothing is sent). A transient
    failure (5xx, 429, timeout) is raised as GitLabUnavailable and uses no attempt. Attempts
    0..max_retries are allowed for refusals; before the last one a refusal asks for a RETRY
    after backoff(attempt). After the last refused attempt the approvals are read once more:
    GitLab answers a repeat approve with 401 (older) or 304 (newer), the same 401 as "not
    allowed", so an approval found there counts as success.

    `approvers` (usernames) replaces the first read when the caller read the approvals for all
    its accounts at once; the read after a failed last attempt is always made.
    """
    project_id = project.id if isinstance(project, Project) else project
    seen = account.project(project_id)
    last = attempt >= max(0, max_retries)
    extra = {"account": account.label, "gitlab_project": str(project_id), "mr_iid": iid}
    # `approvers`: the MR's approvers read just now by the caller for every account at once
    already = (
        account.username() in approvers
        if approvers is not None
        else _has_approved(account, seen, iid)
    )
    if already:
        return ApproveResult(ApproveOutcome.ALREADY, reason="already approved by this account")
    try:
        component.approve(account, project_id, iid, sha, impl=impl)
    except GitLabConflict as err:
        return ApproveResult(
            ApproveOutcome.HEAD_MOVED, status_code=err.status_code, reason=str(err)
        )
    except GitLabUnavailable:
        # 5xx, 429, a timeout, no connection: GitLab's trouble, not a refusal of this approval.
        # Raised as the transient failure it is: the step is retried on its own schedule (never
        # before Retry-After) without using up the refusal attempts, and the retry reads first,
        # so an approve that did land (a timeout after sending) is found then.
        raise
    except GitLabError as err:
        return _after_refusal(account, seen, iid, err, attempt, last=last, extra=extra)
    return ApproveResult(ApproveOutcome.APPROVED, reason="approved")


def _after_refusal(
    account: Account,
    seen: Project,
    iid: int,
    err: GitLabError,
    attempt: int,
    *,
    last: bool,
    extra: dict[str, Any],
) -> ApproveResult:
    """A refused approve: RETRY after backoff while attempts are left and the refusal may pass;
    else APPROVED if the approval is there after all (the refusal or a lost answer hid it),
    else FAILED."""
    code = err.status_code
    final = last or (isinstance(err, GitLabRefused) and code not in _RETRYABLE_REFUSALS)
    if not final:
        delay = backoff(attempt)
        log.info("approve failed; retry scheduled", extra={**extra, "status_code": code})
        return ApproveResult(
            ApproveOutcome.RETRY, retry_in=delay, status_code=code, reason=str(err)
        )
    if _has_approved(account, seen, iid):
        log.info("approve refused but approval present", extra={**extra, "status_code": code})
        return ApproveResult(
            ApproveOutcome.APPROVED, status_code=code, reason="approval found after the refusal"
        )
    log.warning("approve failed", extra={**extra, "status_code": code})
    return ApproveResult(ApproveOutcome.FAILED, status_code=code, reason=str(err))


def unapprove(accounts: list[Account], project: Project, iid: int) -> list[str]:
    """Takes back the approvals `accounts` gave on MR `iid`; the labels of those that had one.

    Reads the approvals once (as `project`'s account); then one POST .../unapprove per account
    found among them. An approval already gone counts as taken back: GitLab answers 404 for
    it up to the release of !244481 and 304 Not Modified after (lib/api/
    merge_request_approvals.rb: `not_found! unless success`, then `not_modified! unless
    merge_request.approved_by?(current_user)`). Safe to repeat.
    """
    present = approved_by(project, iid)
    taken: list[str] = []
    for account in accounts:
        if account.username() not in present:
            continue
        path = f"/projects/{quote(str(project.id), safe='')}/merge_requests/{int(iid)}/unapprove"
        # 404 (older GitLab) or 304 (newer): not approved (any more) by this account
        with suppress(NotFound, NotModified):
            post_json(account.gl, path, what=f"{account.label}: unapprove !{iid}", data={})
        taken.append(account.label)
        log.info("approval taken back", extra={"account": account.label, "mr_iid": iid})
    return taken
