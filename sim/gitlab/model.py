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


#: Pipeline statuses that still block a merge (`ci_still_running`): not complete, not blocked.
#: `waiting_for_callback` (GitLab 16.6, gitlab-org/gitlab!134605) is one of Ci::HasStatus's
#: ACTIVE_STATUSES; `canceling` (behind `ci_canceling_status`, on by default from 17.0,
#: gitlab-org/gitlab!152387) is alive but not complete: the pipeline runs its `after_script`s
#: and ends `canceled` (GitLab: app/models/concerns/ci/has_status.rb).
RUNNING_STATUSES = frozenset(
    {
        "created",
        "waiting_for_resource",
        "preparing",
        "waiting_for_callback",
        "pending",
        "running",
        "scheduled",
        "canceling",
    }
)
#: Ci::HasStatus::COMPLETED_STATUSES: a pipeline that ended (`manual` is blocked, not complete).
COMPLETED_STATUSES = frozenset({"success", "failed", "canceled", "skipped"})
#: Every status `set_pipeline` accepts (Ci::HasStatus::AVAILABLE_STATUSES).
PIPELINE_STATUSES = RUNNING_STATUSES | COMPLETED_STATUSES | {"manual"}
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
    #: a merged results pipeline (`merged_result_pipeline?`: `target_sha` present): the MR head
    #: and the target head its merge-ref commit (`sha`) merges (GitLab: app/models/ci/pipeline.rb)
    source_sha: str | None = None
    target_sha: str | None = None


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
    #: the squash commit a squashed merge made (`squash_commit_sha` in the API, not in hooks)
    squash_commit_sha: str | None = None
    #: the head GitLab's own rebase produced (`rebase_commit_sha`): a push of exactly it keeps
    #: the approvals even with `reset_approvals_on_push`
    rebase_commit_sha: str | None = None
    #: with asynchronous effects: the pipeline `head_pipeline` shows (attached by
    #: MergeRequests::UpdateHeadPipelineWorker), which may belong to an older head
    head_pipeline_id: int | None = None
    #: with asynchronous effects: "unchecked" (a push marked it) or "checking" (a read asked for
    #: a recheck) until the mergeability check runs; None once checked
    merge_check: str | None = None
    #: with asynchronous effects: approvals are being reset after a push
    #: (`temporarily_unapproved?`): `detailed_merge_status` says `approvals_syncing` and the
    #: approvals are still listed until MergeRequestResetApprovalsWorker deletes them
    approvals_syncing: bool = False
    #: the merge-ref commit (`refs/merge-requests/:iid/merge`) of the last merged results pipeline
    merge_ref_sha: str | None = None
    #: `merge_after` (GitLab 17.5+): `detailed_merge_status` is `merge_time` until then
    merge_after: datetime | None = None
    #: external status check responses: (check id, head sha) -> "passed" / "failed"
    status_check_responses: dict[tuple[int, str], str] = field(default_factory=dict)

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
class StatusCheck:
    """An external status check (Ultimate): a service asked about every MR head."""

    id: int
    name: str
    external_url: str


@dataclass
class Job:
    """A piece of GitLab's asynchronous work (a Sidekiq job) the double runs when it falls due:
    `attach_head_pipeline`, `mergeability_check` or `reset_approvals` for one MR."""

    due: datetime
    seq: int
    kind: str
    project_id: int
    mr_iid: int
    #: `reset_approvals`: the users whose approvals it deletes (those given before the push)
    payload: tuple[int, ...] = ()


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
    #: GitLab's asynchronous effects for this project: None follows the double's switch
    async_effects: bool | None = None
    #: `squash_option`: "never", "always", "default_on" or "default_off" (the MR's `squash`)
    squash_option: str = "default_off"
    #: branches whose pushes run a branch pipeline (ref the branch name, source `push`)
    branch_pipelines: set[str] = field(default_factory=set)
    #: external status checks (Ultimate) by id, and whether they must pass before a merge
    #: (`only_allow_merge_if_all_status_checks_passed`)
    status_checks: dict[int, StatusCheck] = field(default_factory=dict)
    status_checks_must_pass: bool = False

    @property
    def name(self) -> str:
        """The last path segment."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def namespace(self) -> str:
        """Everything before the last path segment."""
        return self.path.rsplit("/", 1)[0] if "/" in self.path else ""
