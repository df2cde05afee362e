"""The one seam for every GitLab call (python-gitlab): remote-state-first, safe to run twice.

Nothing here sleeps or retries by waiting: each operation makes a bounded number of immediate
calls (each with the client's timeout) and returns an outcome that tells the caller what to
schedule next. Failures are translated into `bot.gitlab.errors` (transient, unknown outcome,
deterministic), each carrying GitLab's real status code and never a token.
"""

from __future__ import annotations

from bot.approval.backoff import backoff
from bot.gitlab.approve import (
    DEFAULT_CHECK_ITEMS_PATH,
    ApproveComponent,
    ApproveImpl,
    ApproveOutcome,
    ApproveResult,
    approve_once,
    unapprove,
)
from bot.gitlab.changes import (
    BRANCH_PREFIX,
    TRAILER,
    ChangeRef,
    branch_name,
    close_mr,
    commit_message,
    create_change,
    delete_branch,
    has_trailer,
)
from bot.gitlab.client import (
    DEFAULT_TIMEOUT,
    Account,
    NoWaitBackend,
    Project,
    approver_accounts,
    author_account,
    make_client,
)
from bot.gitlab.errors import (
    BranchNotOurs,
    Forbidden,
    GitLabConflict,
    GitLabError,
    GitLabRefused,
    GitLabUnavailable,
    MrClosed,
    NotFound,
    NotModified,
    RateLimited,
    Unauthorized,
    UnknownOutcome,
    Unprocessable,
)
from bot.gitlab.hooks import HookResult, disabled_hooks, ensure_hook, list_hooks
from bot.gitlab.merge import (
    MergeOutcome,
    MergeResult,
    RebaseState,
    RebaseStatus,
    merge,
    rebase_status,
)
from bot.gitlab.notes import find_note, react, set_labels, status_marker, upsert_status_note
from bot.gitlab.reads import approved_by, member_access_level, mr_pipelines, read_mr
from bot.gitlab.views import HOOK_EVENTS, HookView, MrView, NoteView, PipelineView

__all__ = [
    "BRANCH_PREFIX",
    "DEFAULT_CHECK_ITEMS_PATH",
    "DEFAULT_TIMEOUT",
    "HOOK_EVENTS",
    "TRAILER",
    "Account",
    "ApproveComponent",
    "ApproveImpl",
    "ApproveOutcome",
    "ApproveResult",
    "BranchNotOurs",
    "ChangeRef",
    "Forbidden",
    "GitLabConflict",
    "GitLabError",
    "GitLabRefused",
    "GitLabUnavailable",
    "HookResult",
    "HookView",
    "MergeOutcome",
    "MergeResult",
    "MrClosed",
    "MrView",
    "NoWaitBackend",
    "NotFound",
    "NotModified",
    "NoteView",
    "PipelineView",
    "Project",
    "RateLimited",
    "RebaseState",
    "RebaseStatus",
    "Unauthorized",
    "UnknownOutcome",
    "Unprocessable",
    "approve_once",
    "approved_by",
    "approver_accounts",
    "author_account",
    "backoff",
    "branch_name",
    "close_mr",
    "commit_message",
    "create_change",
    "delete_branch",
    "disabled_hooks",
    "ensure_hook",
    "find_note",
    "has_trailer",
    "list_hooks",
    "make_client",
    "member_access_level",
    "merge",
    "mr_pipelines",
    "react",
    "read_mr",
    "rebase_status",
    "set_labels",
    "status_marker",
    "unapprove",
    "upsert_status_note",
]
