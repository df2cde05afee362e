"""Control methods of the double (a mixin): what people and GitLab itself do, on demand."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from . import mr_ops, notes, protection, repo, trains
from .control_flow import FlowControlMixin
from .model import (
    PIPELINE_STATUSES,
    Deployment,
    Note,
    Pipeline,
    Project,
    ProtectedBranch,
    TrainCar,
)
from .seeding import ProjectRef, UserRef


class ControlMixin(FlowControlMixin):
    """People's actions, GitLab's own moves, and state peeks; all under the double's lock."""

    def add_note(
        self, project: ProjectRef, iid: int, author: UserRef, body: str, *, system: bool = False
    ) -> Note:
        """A person (or GitLab, with `system`) comments on the MR; queues the Note Hook."""
        with self.lock:
            p = self._p(project)
            return notes.add_note(
                self.state, p, self.state.mr(p, iid), self._u(author), body, system
            )

    def edit_note(self, project: ProjectRef, iid: int, note_id: int, body: str) -> None:
        """The note's author edits it; queues the Note Hook with `action: update`."""
        with self.lock:
            p = self._p(project)
            mr = self.state.mr(p, iid)
            notes.edit_note(self.state, p, mr, mr.notes[note_id], body)

    def approve_as(self, project: ProjectRef, iid: int, user: UserRef) -> None:
        """A person approves (raises ApiError where the API would refuse)."""
        with self.lock:
            p = self._p(project)
            mr_ops.approve(
                self.state, p, self.state.mr(p, iid), self._u(user), check_items=p.check_items
            )

    def retarget(
        self, project: ProjectRef, iid: int, target_branch: str, *, by: UserRef = "root"
    ) -> None:
        """A person changes the MR's target branch (as `PUT .../merge_requests/:iid` with
        `target_branch` does): the MR now merges into `target_branch`, and GitLab's MR Hook
        `update` goes out with `changes.target_branch` {previous, current}. No new pipeline
        (the head did not move). ApiError 422 for a missing branch or a duplicate MR."""
        with self.lock:
            p = self._p(project)
            mr = self.state.mr(p, iid)
            mr_ops.update_mr(self.state, p, mr, self._u(by), {"target_branch": target_branch})

    def force_push(
        self,
        project: ProjectRef,
        branch: str,
        files: Mapping[str, str | None],
        *,
        base: str | None = None,
        author: UserRef = "root",
        message: str = "Rewrite history",
    ) -> str:
        """A person force-pushes `branch`: it becomes one new commit on `base` (a branch name or
        SHA; default the head of the target branch of the open MR from `branch`, else the
        default branch) with `files` applied (None deletes); the old commits are no longer in
        its history. An open MR from `branch` follows like after any push: new head, a new
        pipeline, MR Hook `update` with `oldrev`. Returns the new SHA. On a protected branch the
        person must be allowed to push, and every matching rule must allow force pushes (else
        ApiError 403, as `git push --force` fails)."""
        with self.lock:
            p = self._p(project)
            start = self._force_base(p, branch, base)
            user = self._u(author)
            protection.check_person_push(self.state, p, user, branch, start)
            tree = dict(self.state.commits[start].tree)
            for path, content in files.items():
                if content is None:
                    tree.pop(path, None)
                else:
                    tree[path] = content
            commit = self.state.make_commit((start,), tree, message, user.id)
            self.state.move_branch(p, branch, commit.sha, user)
            return commit.sha

    def _force_base(self, p: Project, branch: str, base: str | None) -> str:
        """The SHA a force push builds on (see `force_push`)."""
        if base is not None:
            found = p.branches.get(base) or next(
                (sha for sha in self.state.commits if sha.startswith(base)), None
            )
            if found is None:
                raise KeyError(f"no branch or commit {base!r} in {p.path}")
            return found
        mr = next(
            (
                m
                for target in self.state.projects.values()
                for m in target.mrs.values()
                if m.state == "opened" and m.source_project_id == p.id and m.source_branch == branch
            ),
            None,
        )
        if mr is not None:
            return self.state.projects[mr.project_id].branches[mr.target_branch]
        return p.branches[p.default_branch]

    def protection(self, project: ProjectRef, name: str) -> ProtectedBranch | None:
        """The protection rule named exactly `name` (live object: read it), or None."""
        with self.lock:
            return self._p(project).protected_branches.get(name)

    def disable_hook(
        self, project: ProjectRef, hook_id: int, *, until: datetime | None = None
    ) -> None:
        """GitLab auto-disabling: until a time (`temporarily_disabled`) or for good (`disabled`);
        the failure counter is set as the profile's GitLab would have it then."""
        with self.lock:
            hook = self._p(project).hooks[hook_id]
            forty = self.state.profile.hook_disabling == "forty-permanent"
            hook.alert_status = "temporarily_disabled" if until else "disabled"
            hook.disabled_until = until
            hook.recent_failures = 40 if forty and until is None else 4

    def enable_hook(self, project: ProjectRef, hook_id: int) -> None:
        """Re-enables a hook (as a successful test delivery does in GitLab)."""
        with self.lock:
            hook = self._p(project).hooks[hook_id]
            hook.alert_status, hook.disabled_until = "executable", None
            hook.recent_failures = hook.backoff_count = 0

    def deploy(
        self,
        project: ProjectRef,
        *,
        environment: str = "production",
        status: str = "success",
        sha: str | None = None,
        user: UserRef = "root",
        ref: str | None = None,
    ) -> Deployment:
        """Records a deployment of `ref` (a branch or tag; the default branch by default) at
        `sha` (default: that branch's head) to `environment`; queues the Deployment Hook."""
        with self.lock:
            p = self._p(project)
            actor = self._u(user)
            branch = ref or p.default_branch
            head = sha or p.branches.get(branch) or p.tags[branch]
            deployment = Deployment(
                self.state.next_id("deployment", 20),
                p.id,
                environment,
                status,
                head,
                branch,
                actor.id,
                self.state.next_id("job", 900),
                self.state.clock(),
            )
            p.deployments[deployment.id] = deployment
            self.state.emit(p, "deployment", deployment=deployment, actor=actor)
            return deployment

    def set_pipeline(self, project: ProjectRef, pipeline_id: int, status: str) -> None:
        """Moves a pipeline to `status` (success, failed, running, canceled, ...)."""
        if status not in PIPELINE_STATUSES:
            raise ValueError(f"unknown pipeline status {status!r}")
        with self.lock:
            p = self._p(project)
            self.state.set_pipeline_status(p, p.pipelines[pipeline_id], status)

    def latest_pipeline(self, project: ProjectRef, iid: int) -> Pipeline | None:
        """The MR's head pipeline (newest for its head sha)."""
        with self.lock:
            p = self._p(project)
            return self.state.head_pipeline(p, self.state.mr(p, iid))

    def set_merge_trains(self, project: ProjectRef, enabled: bool = True) -> None:
        """A maintainer turns "Merged results pipelines" and "Merge trains" on (or both off)
        in the project's merge request settings (a Premium project: see `edition`)."""
        with self.lock:
            p = self._p(project)
            p.merge_pipelines_enabled = p.merge_trains_enabled = enabled

    def train(self, project: ProjectRef, branch: str | None = None) -> list[TrainCar]:
        """The cars on the merge train of `branch` (default branch by default), first first
        (live objects: read them)."""
        with self.lock:
            p = self._p(project)
            return trains.cars(p, branch or p.default_branch, active=True)

    def train_car(self, project: ProjectRef, iid: int) -> TrainCar | None:
        """The MR's car (on the train, or merged), or None (never added, or dropped)."""
        with self.lock:
            return self._p(project).train_cars.get(iid)

    def set_merge_status(self, project: ProjectRef, iid: int, status: str | None) -> None:
        """Forces `detailed_merge_status` (e.g. `checking`, `approvals_syncing`); None clears."""
        with self.lock:
            p = self._p(project)
            self.state.mr(p, iid).forced_status = status

    def set_conflict(self, project: ProjectRef, iid: int, conflict: bool = True) -> None:
        """Forces a conflict on (or off) regardless of file contents."""
        with self.lock:
            p = self._p(project)
            self.state.mr(p, iid).forced_conflict = conflict

    def plan_rebase(self, project: ProjectRef, iid: int, ok: bool) -> None:
        """The outcome the next automatic (or `ok=None`) rebase completion will have."""
        with self.lock:
            p = self._p(project)
            self.state.mr(p, iid).rebase_outcome = ok

    def complete_rebase(
        self, project: ProjectRef, iid: int, ok: bool | None = None, error: str | None = None
    ) -> None:
        """Finishes the queued rebase: ok moves the branch; failure sets `merge_error`."""
        with self.lock:
            p = self._p(project)
            mr_ops.complete_rebase(self.state, p, self.state.mr(p, iid), ok, error)

    def file(self, project: ProjectRef, path: str, ref: str | None = None) -> str | None:
        """A file's content on a branch (default branch by default), or None."""
        with self.lock:
            p = self._p(project)
            sha = p.branches.get(ref or p.default_branch, ref or "")
            commit = self.state.commits.get(sha)
            return commit.tree.get(path) if commit else None

    def is_ancestor(self, ancestor: str, sha: str) -> bool:
        """Whether commit `ancestor` is in the history of `sha`."""
        with self.lock:
            return repo.is_ancestor(self.state.commits, ancestor, sha)
