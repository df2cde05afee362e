"""What the bot reads from GitLab, as frozen dataclasses parsed from the JSON fields it uses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: Pipeline statuses that mean "not finished yet" (GitLab's pipeline status list,
#: app/models/concerns/ci/has_status.rb: `waiting_for_callback` 16.6+, `canceling` 17.0+,
#: which ends in `canceled`).
PIPELINE_RUNNING = frozenset(
    {
        "created",
        "waiting_for_resource",
        "preparing",
        "pending",
        "running",
        "scheduled",
        "waiting_for_callback",
        "canceling",
    }
)


def _str(data: Mapping[str, Any], key: str, default: str = "") -> str:
    value = data.get(key)
    return value if isinstance(value, str) else default


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _opt_int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _map(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class MrView:
    """One merge request as GitLab shows it now."""

    iid: int
    project_id: int | None
    state: str  # opened | closed | locked | merged
    detailed_merge_status: str | None  # None on GitLab older than 15.6
    sha: str | None  # the source branch head
    merge_commit_sha: str | None
    squash_commit_sha: str | None
    merge_error: str | None
    rebase_in_progress: bool
    has_conflicts: bool
    draft: bool
    labels: tuple[str, ...]
    author: str | None  # username
    source_project_id: int | None
    target_project_id: int | None
    source_branch: str
    target_branch: str
    web_url: str
    head_pipeline_id: int | None
    head_pipeline_status: str | None
    #: the commit the head pipeline ran on: the head's own, a merged results pipeline's
    #: merge-ref commit, or -- until GitLab attaches a push's pipeline -- an older head's
    head_pipeline_sha: str | None = None
    #: its ref: `refs/merge-requests/<iid>/merge` for a merged results pipeline
    head_pipeline_ref: str | None = None
    #: auto-merge is set (`merge_when_pipeline_succeeds`): in a project with merge trains, the
    #: MR is on a train or waiting for its checks to join one
    auto_merge: bool = False

    @property
    def merged_sha(self) -> str | None:
        """The commit carrying the change on the target (merge, squash or fast-forward head)."""
        return self.merge_commit_sha or self.squash_commit_sha or self.sha

    @property
    def pipeline_running(self) -> bool:
        """True while the head pipeline has not finished."""
        return self.head_pipeline_status in PIPELINE_RUNNING

    @property
    def merged_results_pipeline(self) -> bool:
        """The head pipeline ran on the MR's merge ref (a merged results pipeline), not on
        the head itself: the merge-ref commit's parents tell which head it tested."""
        ref = self.head_pipeline_ref or ""
        return ref.startswith("refs/merge-requests/") and ref.endswith("/merge")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MrView:
        """Parses GitLab's merge request JSON (single-MR and list shapes)."""
        pipeline = _map(data, "head_pipeline")
        labels = data.get("labels")
        return cls(
            iid=int(data.get("iid") or 0),
            project_id=_opt_int(data, "project_id"),
            state=_str(data, "state", "opened"),
            detailed_merge_status=_opt_str(data, "detailed_merge_status"),
            sha=_opt_str(data, "sha"),
            merge_commit_sha=_opt_str(data, "merge_commit_sha"),
            squash_commit_sha=_opt_str(data, "squash_commit_sha"),
            merge_error=_opt_str(data, "merge_error"),
            rebase_in_progress=data.get("rebase_in_progress") is True,
            has_conflicts=data.get("has_conflicts") is True,
            draft=data.get("draft") is True or data.get("work_in_progress") is True,
            labels=tuple(x for x in labels if isinstance(x, str))
            if isinstance(labels, list)
            else (),
            author=_opt_str(_map(data, "author"), "username"),
            source_project_id=_opt_int(data, "source_project_id"),
            target_project_id=_opt_int(data, "target_project_id"),
            source_branch=_str(data, "source_branch"),
            target_branch=_str(data, "target_branch"),
            web_url=_str(data, "web_url"),
            head_pipeline_id=_opt_int(pipeline, "id"),
            head_pipeline_status=_opt_str(pipeline, "status"),
            head_pipeline_sha=_opt_str(pipeline, "sha"),
            head_pipeline_ref=_opt_str(pipeline, "ref"),
            auto_merge=data.get("merge_when_pipeline_succeeds") is True,
        )


@dataclass(frozen=True)
class PipelineView:
    """One pipeline run for a merge request."""

    id: int
    sha: str | None
    ref: str | None
    status: str
    web_url: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PipelineView:
        """Parses one entry of GET .../merge_requests/:iid/pipelines."""
        return cls(
            id=int(data.get("id") or 0),
            sha=_opt_str(data, "sha"),
            ref=_opt_str(data, "ref"),
            status=_str(data, "status"),
            web_url=_str(data, "web_url"),
        )


#: Merge train car statuses still on the train: waiting for a pipeline, its pipeline outdated
#: (a car ahead left), or its pipeline testing the current merge result.
CAR_ACTIVE = frozenset({"idle", "stale", "fresh"})
#: Car statuses of a car that left the train by merging (`skip_merged`: merged around it).
CAR_MERGED = frozenset({"merged", "skip_merged"})


@dataclass(frozen=True)
class TrainCar:
    """One MR on a merge train (GitLab's `MergeTrains::Car`), as the Merge Trains API shows it.

    `status`: idle | stale | fresh | merging | merged | skip_merged. The pipeline is the car's
    merge train pipeline (ref `refs/merge-requests/:iid/train`), None until GitLab started it.
    """

    id: int
    iid: int
    status: str
    target_branch: str
    pipeline_id: int | None
    pipeline_status: str | None
    #: the merge result the pipeline tests (the cars ahead and the target, with this MR)
    pipeline_sha: str | None
    merged_at: datetime | None

    @property
    def active(self) -> bool:
        """Still on the train, waiting for its turn or its pipeline."""
        return self.status in CAR_ACTIVE

    @property
    def merging(self) -> bool:
        """GitLab is merging it now."""
        return self.status == "merging"

    @property
    def merged(self) -> bool:
        """It left the train merged."""
        return self.status in CAR_MERGED

    @property
    def pipeline_running(self) -> bool:
        """Its pipeline has not finished (or has not started yet)."""
        return self.pipeline_status is None or self.pipeline_status in PIPELINE_RUNNING

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainCar:
        """Parses one car (GET .../merge_trains/merge_requests/:iid, or an entry of a list)."""
        pipeline = _map(data, "pipeline")
        return cls(
            id=int(data.get("id") or 0),
            iid=int(_map(data, "merge_request").get("iid") or 0),
            status=_str(data, "status"),
            target_branch=_str(data, "target_branch"),
            pipeline_id=_opt_int(pipeline, "id"),
            pipeline_status=_opt_str(pipeline, "status"),
            pipeline_sha=_opt_str(pipeline, "sha"),
            merged_at=_time(data.get("merged_at")),
        )


@dataclass(frozen=True)
class NoteView:
    """One comment on a merge request."""

    id: int
    body: str
    author: str | None
    system: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NoteView:
        """Parses one entry of GET .../notes."""
        return cls(
            id=int(data.get("id") or 0),
            body=_str(data, "body"),
            author=_opt_str(_map(data, "author"), "username"),
            system=data.get("system") is True,
        )


#: Every project hook event flag `ensure_hook` manages (the ones not asked for are turned off).
HOOK_EVENTS = (
    "push_events",
    "tag_push_events",
    "issues_events",
    "confidential_issues_events",
    "merge_requests_events",
    "note_events",
    "confidential_note_events",
    "job_events",
    "pipeline_events",
    "wiki_page_events",
    "deployment_events",
    "releases_events",
)


@dataclass(frozen=True)
class HookView:
    """One project webhook, with whether GitLab has stopped sending to it."""

    id: int
    url: str
    events: frozenset[str]
    alert_status: str | None  # executable | temporarily_disabled | disabled (GitLab 15.7+)
    disabled_until: datetime | None

    def disabled(self, now: datetime) -> bool:
        """True when GitLab has disabled the hook (for now or for good) at `now`."""
        if self.alert_status not in (None, "executable"):
            return True
        return self.disabled_until is not None and self.disabled_until > now

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HookView:
        """Parses one entry of GET /projects/:id/hooks."""
        return cls(
            id=int(data.get("id") or 0),
            url=_str(data, "url"),
            events=frozenset(name for name in HOOK_EVENTS if data.get(name) is True),
            alert_status=_opt_str(data, "alert_status"),
            disabled_until=_time(data.get("disabled_until")),
        )
