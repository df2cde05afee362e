"""The double's data: users, projects, commits, merge requests, pipelines, notes, hooks."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum


class Access(IntEnum):
    """GitLab's project access levels."""

    NONE = 0
    GUEST = 10
    REPORTER = 20
    DEVELOPER = 30
    MAINTAINER = 40
    OWNER = 50


#: Pipeline statuses that still block a merge (`ci_still_running`).
RUNNING_STATUSES = frozenset(
    {"created", "waiting_for_resource", "preparing", "pending", "running", "scheduled"}
)
#: Every status `set_pipeline` accepts.
PIPELINE_STATUSES = RUNNING_STATUSES | {"success", "failed", "canceled", "skipped", "manual"}
#: Hook event flags GitLab stores on a project hook, with their defaults.
HOOK_FLAGS: dict[str, bool] = {
    "push_events": True,
    "tag_push_events": False,
    "merge_requests_events": False,
    "pipeline_events": False,
    "note_events": False,
    "confidential_note_events": False,
    "job_events": False,
    "deployment_events": False,
    "releases_events": False,
    "issues_events": False,
    "wiki_page_events": False,
}


@dataclass
class User:
    """A GitLab account, found by its token."""

    id: int
    username: str
    name: str
    token: str | None
    #: the token's scopes, as GET /personal_access_tokens/self shows them
    scopes: tuple[str, ...] = ("api",)


@dataclass
class Commit:
    """A commit with the full tree it points at (path -> content); never mutated."""

    sha: str
    parents: tuple[str, ...]
    tree: dict[str, str]
    message: str
    author_id: int
    created_at: datetime
    seq: int
    #: path -> the newest commit at or below this one that changed it (filled on demand)
    last_change: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def title(self) -> str:
        """The first line of the message."""
        return self.message.split("\n", 1)[0]


@dataclass
class Pipeline:
    """A pipeline, for an MR (`mr_iid`) or a branch."""

    id: int
    iid: int
    project_id: int
    sha: str
    before_sha: str
    ref: str
    status: str
    source: str
    user_id: int
    created_at: datetime
    updated_at: datetime
    mr_iid: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass
class Award:
    """An award emoji on a note."""

    id: int
    name: str
    user_id: int
    note_id: int
    created_at: datetime


@dataclass
class Note:
    """A comment (or system note) on a merge request."""

    id: int
    body: str
    author_id: int
    mr_iid: int
    created_at: datetime
    updated_at: datetime
    system: bool = False
    awards: list[Award] = field(default_factory=list)


@dataclass
class Hook:
    """A project webhook; `alert_status` and `disabled_until` follow GitLab's auto-disabling."""

    id: int
    project_id: int
    url: str
    token: str | None
    flags: dict[str, bool]
    enable_ssl_verification: bool
    created_at: datetime
    alert_status: str = "executable"
    disabled_until: datetime | None = None
    #: consecutive failed deliveries (GitLab's `recent_failures`; a 2xx/3xx resets it)
    recent_failures: int = 0
    #: backoffs so far (GitLab's `backoff_count`, up to 17.10)
    backoff_count: int = 0


@dataclass
class Deployment:
    """A deployment of a commit to an environment."""

    id: int
    project_id: int
    environment: str
    status: str
    sha: str
    ref: str
    user_id: int
    deployable_id: int
    created_at: datetime


@dataclass
class MergeRequest:
    """A merge request; `sha` follows its source branch head while open."""

    id: int
    iid: int
    project_id: int
    source_project_id: int
    source_branch: str
    target_branch: str
    title: str
    description: str
    author_id: int
    sha: str
    created_at: datetime
    updated_at: datetime
    labels: list[str] = field(default_factory=list)
    state: str = "opened"
    remove_source_branch: bool = False
    approvals: list[int] = field(default_factory=list)
    merge_commit_sha: str | None = None
    #: where the MR's diff starts once merged: the merge base of its head and the target then
    diff_base_sha: str | None = None
    merged_by_id: int | None = None
    merged_at: datetime | None = None
    closed_by_id: int | None = None
    closed_at: datetime | None = None
    merge_error: str | None = None
    rebase_in_progress: bool = False
    rebase_reads: int = 0
    rebase_started_at: datetime | None = None
    rebase_outcome: bool | None = None
    rebase_failed: bool = False
    forced_status: str | None = None
    forced_conflict: bool = False
    notes: dict[int, Note] = field(default_factory=dict)
    #: auto-merge is set (`merge_when_pipeline_succeeds`): on a merge train, or waiting to join
    #: one when its checks pass
    auto_merge: bool = False
    #: who set auto-merge (the train car's user once it joins)
    auto_merge_user_id: int | None = None
    squash: bool = False

    @property
    def draft(self) -> bool:
        """GitLab's draft detection from the title prefix."""
        lowered = self.title.lower()
        return lowered.startswith(("draft:", "[draft]", "(draft)", "draft -", "wip:", "[wip]"))


#: Merge train car statuses (`MergeTrains::Car`): still to merge, and done.
CAR_ACTIVE = frozenset({"idle", "stale", "fresh"})
CAR_COMPLETE = frozenset({"merging", "merged", "skip_merged"})


@dataclass
class TrainCar:
    """One MR on the merge train of its target branch (GitLab keeps the row once merged)."""

    id: int
    mr_iid: int
    project_id: int
    target_branch: str
    user_id: int
    created_at: datetime
    updated_at: datetime
    status: str = "idle"
    pipeline_id: int | None = None
    #: the ref the car's merge result was built on (the car ahead's, or the target's head)
    base_sha: str | None = None
    #: the car's merge result: its pipeline runs on it, and the target moves to it on merge
    train_sha: str | None = None
    merged_at: datetime | None = None

    @property
    def active(self) -> bool:
        """Still on the train (idle, stale or fresh)."""
        return self.status in CAR_ACTIVE


@dataclass
class AccessEntry:
    """One entry of a protected branch's push, merge or unprotect list: a role (`access_level`
    0, 30, 40 or 60), a user, a group or a deploy key."""

    id: int
    access_level: int | None = None
    user_id: int | None = None
    group_id: int | None = None
    deploy_key_id: int | None = None


@dataclass
class ProtectedBranch:
    """A protection rule; `name` is a branch name or a wildcard (`gitops/*`)."""

    id: int
    name: str
    push: list[AccessEntry] = field(default_factory=list)
    merge: list[AccessEntry] = field(default_factory=list)
    unprotect: list[AccessEntry] = field(default_factory=list)
    allow_force_push: bool = False
    code_owner_approval_required: bool = False


@dataclass
class Project:
    """A project and its repository refs, MRs, pipelines, hooks and settings."""

    id: int
    path: str
    default_branch: str
    created_at: datetime
    branches: dict[str, str] = field(default_factory=dict)
    #: lightweight tags by name -> commit sha (a ref name resolves to a tag before a branch)
    tags: dict[str, str] = field(default_factory=dict)
    members: dict[int, int] = field(default_factory=dict)
    required_approvals: int = 0
    merge_method: str = "merge"
    pipelines_enabled: bool = True
    pipeline_must_succeed: bool = True
    reset_approvals_on_push: bool = False
    denied_approvers: set[int] = field(default_factory=set)
    check_items: list[str] | None = None
    mrs: dict[int, MergeRequest] = field(default_factory=dict)
    pipelines: dict[int, Pipeline] = field(default_factory=dict)
    hooks: dict[int, Hook] = field(default_factory=dict)
    deployments: dict[int, Deployment] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    #: protection rules by name (exact or wildcard), in creation order
    protected_branches: dict[str, ProtectedBranch] = field(default_factory=dict)
    #: "Merged results pipelines" and "Merge trains" in the MR settings (Premium): both are
    #: needed for merge trains, as in GitLab
    merge_pipelines_enabled: bool = False
    merge_trains_enabled: bool = False
    #: the merge train cars by MR iid (one per MR, as GitLab's has_one); dropped cars are gone
    train_cars: dict[int, TrainCar] = field(default_factory=dict)
    next_mr_iid: int = 1
    next_pipeline_iid: int = 1
    #: the custom CI/CD configuration file (`ci_config_path`): a path, `file@group/project[:ref]`
    #: or a URL; None when unset (`.gitlab-ci.yml`)
    ci_config_path: str | None = None
    #: "private" hides the project from non-members (GitLab answers 404 "Project Not Found");
    #: "internal" shows it to every signed-in user
    visibility: str = "internal"

    @property
    def name(self) -> str:
        """The last path segment."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def namespace(self) -> str:
        """Everything before the last path segment."""
        return self.path.rsplit("/", 1)[0] if "/" in self.path else ""
