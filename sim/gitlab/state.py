"""The double's state and the rules GitLab derives from it (merge status, pipelines, events).

No HTTP here: routes and control methods both call into this, under the double's lock.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from . import flow, repo, trains, versions, webhooks
from .errors import not_found
from .model import (
    COMPLETED_STATUSES,
    RUNNING_STATUSES,
    Access,
    Commit,
    Hook,
    Job,
    MergeRequest,
    Pipeline,
    Project,
    User,
)
from .oauth import OAuthState

#: Hook flag that subscribes to each webhook kind.
EVENT_FLAGS = {
    "merge_request": "merge_requests_events",
    "pipeline": "pipeline_events",
    "note": "note_events",
    "deployment": "deployment_events",
}


class State:
    """Everything the double knows; mutated only under the double's lock."""

    def __init__(self, web_url: str, clock: Callable[[], datetime]) -> None:
        self.web_url = web_url.rstrip("/")
        self.clock = clock
        #: the GitLab release the double answers as (versions.py)
        self.profile = versions.profile(versions.DEFAULT)
        #: GitLab's `auto_disabling_web_hooks` (always on at GitLab.com; a flag off by default on
        #: Self-Managed since 15.10, #390157): hooks failing four times in a row are disabled
        self.hook_auto_disabling = True
        #: namespaces with "Require a commit SHA on the merge requests API" on (GitLab 19.2+)
        self.require_sha_namespaces: set[str] = set()
        #: "premium" (per-user and per-group protected branch entries) or "ce" (roles only)
        self.edition = "premium"
        self.new_pipeline_status = "running"
        self.rebase_auto_after: int | None = None
        #: seconds a running MR pipeline takes before it finishes by itself (None: never)
        self.pipeline_seconds: float | None = None
        #: the status such a pipeline finishes in
        self.pipeline_result = "success"
        #: seconds a queued rebase takes before it completes by itself (None: never)
        self.rebase_seconds: float | None = None
        #: GitLab's asynchronous effects (flow.py) for every project without its own setting,
        #: and how long each takes on the double's clock
        self.async_effects = False
        self.head_pipeline_attach_seconds: float = 0
        self.mergeability_check_seconds: float = 0
        self.approval_reset_seconds: float = 10
        #: queued asynchronous work (flow.py), run by `timing.run_due` or `flow.run_all`
        self.jobs: list[Job] = []
        self.users: dict[int, User] = {}
        self.projects: dict[int, Project] = {}
        self.commits: dict[str, Commit] = {}
        #: merge trains: projects waiting for another pass of `trains.settle`, and whether one
        #: is running (settling starts and cancels pipelines, which asks to settle again)
        self.trains_pending: set[int] = set()
        self.trains_settling = False
        self.outgoing: list[webhooks.Delivery] = []
        #: set whenever a webhook is queued (a relay waits on it instead of polling)
        self.emitted = threading.Event()
        self._counters: dict[str, Iterator[int]] = {}
        #: OAuth applications, codes and tokens (oauth.py)
        self.oauth = OAuthState()

    def next_id(self, kind: str, start: int = 1) -> int:
        """The next id in a global sequence per kind (users, projects, mrs, notes, ...)."""
        counter = self._counters.setdefault(kind, itertools.count(start))
        return next(counter)

    # -- lookups ---------------------------------------------------------------------------

    def user_by_token(self, token: str) -> User | None:
        """The user a token belongs to (a personal access token, or one OAuth issued)."""
        found = next((u for u in self.users.values() if u.token and u.token == token), None)
        oauth_user = self.oauth.user_id(token) if found is None else None
        return found if oauth_user is None else self.users.get(oauth_user)

    def user_named(self, username: str) -> User:
        """A user by username (a test's mistake if unknown)."""
        for user in self.users.values():
            if user.username == username:
                return user
        raise KeyError(f"no user {username!r} in the double")

    def project(self, ref: str | int) -> Project:
        """A project by numeric id or (URL-encoded or not) path; GitLab's 404 when unknown."""
        text = unquote(str(ref))
        if text.isdigit() and int(text) in self.projects:
            return self.projects[int(text)]
        for project in self.projects.values():
            if project.path == text:
                return project
        raise not_found("Project Not Found")

    def mr(self, project: Project, iid: int) -> MergeRequest:
        """A merge request by iid; GitLab's 404 when unknown."""
        if iid not in project.mrs:
            raise not_found("Not found")
        return project.mrs[iid]

    def access(self, project: Project, user_id: int) -> int:
        """The user's access level on the project (0 when not a member)."""
        return project.members.get(user_id, Access.NONE)

    def project_url(self, project: Project) -> str:
        """The project's web URL."""
        return f"{self.web_url}/{project.path}"

    def mr_url(self, project: Project, mr: MergeRequest) -> str:
        """The merge request's web URL."""
        return f"{self.project_url(project)}/-/merge_requests/{mr.iid}"

    def label_id(self, project: Project, title: str) -> int:
        """A stable id for a label title (labels spring into existence when used)."""
        if title not in project.labels:
            project.labels[title] = self.next_id("label", 100)
        return project.labels[title]

    # -- git -------------------------------------------------------------------------------

    def make_commit(
        self, parents: tuple[str, ...], tree: dict[str, str], message: str, author_id: int
    ) -> Commit:
        """Stores a new commit with a deterministic, unique sha."""
        seq = self.next_id("commit")
        seed = json.dumps([seq, parents, message, sorted(tree.items())]).encode()
        sha = hashlib.sha1(seed, usedforsecurity=False).hexdigest()
        commit = Commit(sha, parents, dict(tree), message, author_id, self.clock(), seq)
        self.commits[sha] = commit
        return commit

    def push(
        self,
        project: Project,
        branch: str,
        tree: dict[str, str],
        message: str,
        author: User,
        start_sha: str | None = None,
    ) -> Commit:
        """Commits `tree` on top of the branch (or `start_sha`) and moves the branch."""
        parent = project.branches.get(branch, start_sha)
        commit = self.make_commit((parent,) if parent else (), tree, message, author.id)
        self.move_branch(project, branch, commit.sha, author)
        return commit

    def move_branch(self, project: Project, branch: str, sha: str, actor: User) -> None:
        """Points a branch at `sha` and updates the open MRs whose source it is (and, with
        asynchronous effects, marks those it is the target of unchecked); a branch with branch
        pipelines gets one."""
        before = project.branches.get(branch)
        project.branches[branch] = sha
        for target in self.projects.values():
            for mr in target.mrs.values():
                if (
                    mr.state == "opened"
                    and mr.source_project_id == project.id
                    and mr.source_branch == branch
                    and mr.sha != sha
                ):
                    self.on_new_head(target, mr, sha, mr.sha, actor)
        for mr in project.mrs.values():
            if mr.target_branch == branch and before != sha:
                flow.mark_unchecked(self, project, mr)
        if branch in project.branch_pipelines and before != sha:
            self.create_branch_pipeline(project, branch, actor, before)
        trains.on_change(self, project)  # a target moved outside its train: the cars rebuild

    def on_new_head(
        self, project: Project, mr: MergeRequest, sha: str, before: str, actor: User
    ) -> None:
        """What GitLab does when an MR's source branch moves: new diff, pipeline, hook."""
        mr.sha = sha
        mr.rebase_failed = False
        mr.merge_error = None
        mr.updated_at = self.clock()
        flow.mark_unchecked(self, project, mr)
        flow.reset_approvals_on_push(self, project, mr, sha)
        self.emit(project, "merge_request", mr=mr, actor=actor, action="update", oldrev=before)
        trains.on_new_head(self, project, mr)  # it leaves its merge train, if on one
        self.create_pipeline(project, mr, actor, before)

    # -- pipelines -------------------------------------------------------------------------

    def create_pipeline(
        self, project: Project, mr: MergeRequest, actor: User, before: str | None = None
    ) -> Pipeline | None:
        """A new MR pipeline for the head (status from `new_pipeline_status`): on the merge ref
        with merged results pipelines (flow.merge_ref), else detached on the head. It becomes
        the head pipeline at once, or (asynchronous effects) when its attach job runs."""
        if not project.pipelines_enabled:
            return None
        merged = flow.merge_ref(self, project, mr) if flow.merged_results(self, project) else None
        pipeline = self._new_pipeline(
            project,
            sha=merged.sha if merged else mr.sha,
            ref=f"refs/merge-requests/{mr.iid}/{'merge' if merged else 'head'}",
            source="merge_request_event",
            actor=actor,
            before=before,
        )
        pipeline.mr_iid = mr.iid
        if merged is not None:
            pipeline.target_sha, pipeline.source_sha = merged.parents
        if flow.is_async(self, project):
            flow.schedule(
                self, project, mr, "attach_head_pipeline", self.head_pipeline_attach_seconds
            )
        else:
            mr.head_pipeline_id = pipeline.id
        self.set_pipeline_status(project, pipeline, self.new_pipeline_status)
        return pipeline

    def create_branch_pipeline(
        self, project: Project, branch: str, actor: User, before: str | None = None
    ) -> Pipeline | None:
        """A branch pipeline for the branch's head (`source` push, `ref` the branch name), as
        a push to a branch whose CI configuration runs on it starts."""
        if not project.pipelines_enabled:
            return None
        sha = project.branches[branch]
        pipeline = self._new_pipeline(
            project, sha=sha, ref=branch, source="push", actor=actor, before=before
        )
        self.set_pipeline_status(project, pipeline, self.new_pipeline_status)
        return pipeline

    def _new_pipeline(
        self, project: Project, *, sha: str, ref: str, source: str, actor: User, before: str | None
    ) -> Pipeline:
        """A stored pipeline in `created` (no hook: GitLab sends one on each transition)."""
        now = self.clock()
        pipeline = Pipeline(
            id=self.next_id("pipeline", 1000),
            iid=project.next_pipeline_iid,
            project_id=project.id,
            sha=sha,
            before_sha=before or "0" * 40,
            ref=ref,
            status="created",
            source=source,
            user_id=actor.id,
            created_at=now,
            updated_at=now,
        )
        project.next_pipeline_iid += 1
        project.pipelines[pipeline.id] = pipeline
        return pipeline

    def set_pipeline_status(self, project: Project, pipeline: Pipeline, status: str) -> None:
        """Moves a pipeline and sends the Pipeline Hook GitLab would send."""
        now = self.clock()
        pipeline.status = status
        pipeline.updated_at = now
        if status not in {"created", "pending"} and pipeline.started_at is None:
            pipeline.started_at = now
        pipeline.finished_at = None if status in RUNNING_STATUSES else now
        mr = project.mrs.get(pipeline.mr_iid) if pipeline.mr_iid else None
        self.emit(project, "pipeline", pipeline=pipeline, mr=mr, actor=self.users[pipeline.user_id])
        trains.on_change(self, project)

    def mr_pipelines(self, project: Project, mr: MergeRequest) -> list[Pipeline]:
        """The MR's pipelines, newest first."""
        found = [p for p in project.pipelines.values() if p.mr_iid == mr.iid]
        return sorted(found, key=lambda p: -p.id)

    def head_pipeline(self, project: Project, mr: MergeRequest) -> Pipeline | None:
        """The newest MR pipeline for the MR's head: run on it, or a merged results pipeline
        built from it (`find_diff_head_pipeline`: `for_sha_or_source_sha(diff_head_sha)`)."""
        return next(
            (p for p in self.mr_pipelines(project, mr) if flow.matches_head(p, mr.sha)), None
        )

    # -- merge status ----------------------------------------------------------------------

    def has_conflicts(self, project: Project, mr: MergeRequest) -> bool:
        """Conflict: forced, a failed rebase, or both sides changed a file differently."""
        if mr.forced_conflict or mr.rebase_failed:
            return True
        target = project.branches.get(mr.target_branch)
        return bool(target and repo.conflicting_paths(self.commits, mr.sha, target))

    def needs_rebase(self, project: Project, mr: MergeRequest) -> bool:
        """In a fast-forward project, whether the target moved past the MR's base."""
        target = project.branches.get(mr.target_branch)
        if project.merge_method not in {"ff", "rebase_merge"} or target is None:
            return False
        return not repo.is_ancestor(self.commits, target, mr.sha)

    def detailed_status(
        self, project: Project, mr: MergeRequest, *, git_checks: bool = True
    ) -> str:
        """GitLab's `detailed_merge_status`: the first failing check wins, in GitLab's order
        (MergeRequests::Mergeability::DetailedMergeStatusService: a pending check first, then
        `all_mergeability_checks` without CI, EE's before CE's, the git checks last, and the CI
        check after all of them; GitLab: app/models/merge_request.rb,
        ee/app/models/ee/merge_request.rb `mergeable_state_checks`). `git_checks=False` leaves
        out conflict and need_rebase (GitLab's `mergeable_state?` without
        `mergeable_git_state_checks`)."""
        if mr.state != "opened":
            return "not_open"
        if mr.forced_status:
            return mr.forced_status
        if mr.merge_check is not None:
            return mr.merge_check
        if self.edition == "premium" and mr.approvals_syncing:
            return "approvals_syncing"
        if len(mr.approvals) < project.required_approvals:
            return "not_approved"
        if self.edition == "premium" and self.status_checks_pending(project, mr):
            return "status_checks_must_pass"
        if mr.merge_after is not None and mr.merge_after > self.clock():
            return "merge_time"
        if mr.draft:
            return "draft_status"
        if git_checks and self.has_conflicts(project, mr):
            return "conflict"
        if git_checks and self.needs_rebase(project, mr):
            return "need_rebase"
        return self.ci_status(project, mr)

    def ci_status(self, project: Project, mr: MergeRequest) -> str:
        """The CI check (CheckCiStatusService) with "Pipelines must succeed": only a head
        pipeline that succeeded passes; one not complete yet is `ci_still_running`
        (`diff_head_pipeline_considered_in_progress?`), a failed, canceled or skipped one, or
        none, `ci_must_pass`."""
        if not (project.pipelines_enabled and project.pipeline_must_succeed):
            return "mergeable"
        pipeline = flow.diff_head_pipeline(self, project, mr)
        if pipeline is not None and pipeline.status == "success":
            return "mergeable"
        if pipeline is not None and pipeline.status not in COMPLETED_STATUSES:
            return "ci_still_running"
        return "ci_must_pass"

    def status_checks_pending(self, project: Project, mr: MergeRequest) -> bool:
        """`any_external_status_checks_not_passed?` with "Status checks must succeed": a check
        that has not answered `passed` for the current head."""
        return project.status_checks_must_pass and any(
            mr.status_check_responses.get((check.id, mr.sha)) != "passed"
            for check in project.status_checks.values()
        )

    def merge_status(self, project: Project, mr: MergeRequest) -> str:
        """The deprecated `merge_status` GitLab still sends."""
        if mr.forced_status in {"checking", "unchecked"}:
            return mr.forced_status
        if mr.merge_check is not None and mr.state == "opened":
            return mr.merge_check
        return "cannot_be_merged" if self.has_conflicts(project, mr) else "can_be_merged"

    # -- hooks and events ------------------------------------------------------------------

    def hook_executable(self, hook: Hook) -> bool:
        """Whether GitLab would call this hook now (not disabled, or the disabling expired)."""
        if hook.alert_status == "disabled":
            return False
        if hook.alert_status == "temporarily_disabled":
            return hook.disabled_until is not None and hook.disabled_until <= self.clock()
        return True

    def emit(self, project: Project, kind: str, **build: Any) -> None:
        """Queues the webhook GitLab would send to each subscribed, enabled hook."""
        for hook in project.hooks.values():
            if not hook.flags.get(EVENT_FLAGS[kind]) or not self.hook_executable(hook):
                continue
            payload = webhooks.build(self, kind, project=project, **build)
            headers = webhooks.headers(
                kind, hook.token, instance=self.web_url, profile=self.profile
            )
            body = json.dumps(payload).encode()
            self.outgoing.append(webhooks.Delivery(kind, hook.url, headers, body, hook.id))
            self.emitted.set()
