"""Control methods for what changes a merge request's flow (a mixin of the double): GitLab's
asynchronous effects (flow.py) and the project and MR settings that differ between
installations (merge method, squash, merged results pipelines, pipelines must succeed, reset
approvals on push, external status checks, `merge_after`, branch pipelines)."""

from __future__ import annotations

from datetime import datetime

from . import flow
from .model import Job, Pipeline, StatusCheck
from .seeding import ProjectRef, SeedingMixin

MERGE_METHODS = ("merge", "rebase_merge", "ff")
SQUASH_OPTIONS = ("never", "always", "default_on", "default_off")


class FlowControlMixin(SeedingMixin):
    """Switches for the flow's settings and GitLab's asynchronous work; under the double's
    lock."""

    # -- asynchronous effects --------------------------------------------------------------

    def set_async_effects(
        self,
        enabled: bool = True,
        *,
        project: ProjectRef | None = None,
        attach_seconds: float | None = None,
        mergeability_seconds: float | None = None,
        approval_reset_seconds: float | None = None,
    ) -> None:
        """Turns GitLab's asynchronous effects on (or off) for the whole double, or for one
        `project`: after a push the MR's `head_pipeline` lags until its attach job runs, its
        merge status is `unchecked` until rechecked, and `reset_approvals_on_push` goes
        through `approvals_syncing` (flow.py). The delays (seconds of the double's clock; 0, 0
        and GitLab's 10 by default) apply to jobs queued from now on. The MRs open now keep the
        head pipeline they show."""
        with self.lock:
            state = self.state
            if project is None:
                state.async_effects = enabled
            else:
                self._p(project).async_effects = enabled
            if attach_seconds is not None:
                state.head_pipeline_attach_seconds = attach_seconds
            if mergeability_seconds is not None:
                state.mergeability_check_seconds = mergeability_seconds
            if approval_reset_seconds is not None:
                state.approval_reset_seconds = approval_reset_seconds
            for p in state.projects.values():
                for mr in p.mrs.values():
                    shown = state.head_pipeline(p, mr)
                    if mr.head_pipeline_id is None and shown is not None:
                        mr.head_pipeline_id = shown.id

    def pending_effects(self, project: ProjectRef | None = None) -> list[Job]:
        """GitLab's queued asynchronous jobs (live objects: read them), soonest first."""
        with self.lock:
            p = self._p(project) if project is not None else None
            return sorted(
                (j for j in self.state.jobs if p is None or j.project_id == p.id),
                key=lambda j: (j.due, j.seq),
            )

    def run_effects(
        self, kind: str | None = None, *, project: ProjectRef | None = None, iid: int | None = None
    ) -> int:
        """Runs GitLab's queued asynchronous jobs now, whatever the clock says (all, or those of
        one kind: `attach_head_pipeline`, `mergeability_check`, `reset_approvals`; of one
        project or MR); how many ran."""
        if kind is not None and kind not in flow.KINDS:
            raise ValueError(f"unknown kind {kind!r}: one of {flow.KINDS}")
        with self.lock:
            p = self._p(project) if project is not None else None
            return flow.run_all(self.state, kind, p, iid)

    def shown_head_pipeline(self, project: ProjectRef, iid: int) -> Pipeline | None:
        """The pipeline GET /merge_requests/:iid shows as `head_pipeline` now."""
        with self.lock:
            p = self._p(project)
            return flow.shown_head_pipeline(self.state, p, self.state.mr(p, iid))

    # -- project settings ------------------------------------------------------------------

    def set_merge_method(self, project: ProjectRef, method: str) -> None:
        """The project's merge method: `merge` (merge commit), `rebase_merge` (merge commit
        with semi-linear history: the head must be up to date) or `ff` (fast-forward)."""
        if method not in MERGE_METHODS:
            raise ValueError(f"merge_method is one of {MERGE_METHODS}")
        with self.lock:
            self._p(project).merge_method = method

    def set_squash_option(self, project: ProjectRef, option: str) -> None:
        """The project's "Squash commits when merging" (`squash_option`)."""
        if option not in SQUASH_OPTIONS:
            raise ValueError(f"squash_option is one of {SQUASH_OPTIONS}")
        with self.lock:
            self._p(project).squash_option = option

    def set_squash(self, project: ProjectRef, iid: int, squash: bool = True) -> None:
        """The MR's `squash` (as its author ticks "Squash commits")."""
        with self.lock:
            p = self._p(project)
            self.state.mr(p, iid).squash = squash

    def set_merged_results(self, project: ProjectRef, enabled: bool = True) -> None:
        """ "Merged results pipelines" (Premium): MR pipelines run on the merge ref."""
        with self.lock:
            self._p(project).merge_pipelines_enabled = enabled

    def set_pipelines_must_succeed(self, project: ProjectRef, enabled: bool = True) -> None:
        """ "Pipelines must succeed" (`only_allow_merge_if_pipeline_succeeds`)."""
        with self.lock:
            self._p(project).pipeline_must_succeed = enabled

    def set_reset_approvals_on_push(self, project: ProjectRef, enabled: bool = True) -> None:
        """ "Remove all approvals when commits are added to the source branch"."""
        with self.lock:
            self._p(project).reset_approvals_on_push = enabled

    def set_branch_pipelines(self, project: ProjectRef, *branches: str) -> None:
        """The branches whose pushes (merges included) run a branch pipeline."""
        with self.lock:
            self._p(project).branch_pipelines = set(branches)

    def run_branch_pipeline(
        self, project: ProjectRef, branch: str | None = None, *, user: str = "root"
    ) -> Pipeline | None:
        """A branch pipeline on a branch's head now (default branch by default), as a push or
        "Run pipeline" starts."""
        with self.lock:
            p = self._p(project)
            return self.state.create_branch_pipeline(
                p, branch or p.default_branch, self._u(user), None
            )

    # -- external status checks and merge_after --------------------------------------------

    def add_status_check(
        self, project: ProjectRef, name: str, *, external_url: str | None = None
    ) -> StatusCheck:
        """An external status check (Ultimate) asked about every MR head."""
        with self.lock:
            p = self._p(project)
            check = StatusCheck(
                self.state.next_id("status_check", 10),
                name,
                external_url or f"https://checks.example.com/{name}",
            )
            p.status_checks[check.id] = check
            return check

    def set_status_checks_must_pass(self, project: ProjectRef, enabled: bool = True) -> None:
        """ "Status checks must succeed" (`only_allow_merge_if_all_status_checks_passed`)."""
        with self.lock:
            self._p(project).status_checks_must_pass = enabled

    def respond_status_check(
        self, project: ProjectRef, iid: int, check: str | int, status: str
    ) -> None:
        """The external service answers `passed` or `failed` for the MR's current head (as
        POST .../status_check_responses does); a new head is pending again."""
        if status not in {"passed", "failed"}:
            raise ValueError("status is 'passed' or 'failed'")
        with self.lock:
            p = self._p(project)
            mr = self.state.mr(p, iid)
            found = next((c for c in p.status_checks.values() if check in {c.id, c.name}), None)
            if found is None:
                raise KeyError(f"no status check {check!r} in {p.path}")
            mr.status_check_responses[(found.id, mr.sha)] = status

    def status_checks(self, project: ProjectRef, iid: int) -> dict[str, str]:
        """Each status check's status for the MR's head: `pending`, `passed` or `failed`."""
        with self.lock:
            p = self._p(project)
            mr = self.state.mr(p, iid)
            return {
                c.name: mr.status_check_responses.get((c.id, mr.sha), "pending")
                for c in p.status_checks.values()
            }

    def set_merge_after(self, project: ProjectRef, iid: int, when: datetime | None) -> None:
        """The MR's `merge_after` (GitLab 17.5+): no merge before it (None clears)."""
        with self.lock:
            p = self._p(project)
            self.state.mr(p, iid).merge_after = when
