"""GitLab's asynchronous effects and the project settings that change a merge request's flow.

With asynchronous effects on (`State.async_effects`, or `Project.async_effects` for one project;
off by default, when the double does everything at once), a push to an MR's source branch does
what GitLab's Sidekiq jobs do, each a `Job` that falls due on the double's clock (`timing`):

- `attach_head_pipeline`: the new head's pipeline becomes the MR's `head_pipeline` only when
  MergeRequests::UpdateHeadPipelineWorker runs (it subscribes to Ci::PipelineCreatedEvent, which
  Ci::CreatePipelineService publishes once the pipeline is saved, before it is processed; GitLab:
  app/workers/merge_requests/update_head_pipeline_worker.rb,
  lib/gitlab/event_store/subscriptions/merge_requests_subscriptions.rb,
  app/services/ci/create_pipeline_service.rb). Until then GET /merge_requests/:iid shows the
  previous head's pipeline, with that pipeline's own `sha`. The new pipeline's first Pipeline
  Hook (PipelineHooksWorker, enqueued on its first status transition: app/models/ci/pipeline.rb)
  is queued at once: both jobs run in Sidekiq, so a client may get the hook before the attach.
- `mergeability_check`: MergeRequests::RefreshService marks the MR `unchecked`
  (`mark_as_unchecked`) for a push to its source or target branch; a read of the MR asks for a
  recheck (`check_mergeability(async: true)` marks it `checking` and queues
  MergeRequestMergeabilityCheckWorker; GitLab: lib/api/entities/merge_request_basic.rb,
  app/services/merge_requests/mergeability_check_service.rb). `detailed_merge_status` says so
  until the check ran (MergeRequests::Mergeability::DetailedMergeStatusService).
- `reset_approvals`: with `reset_approvals_on_push` the push marks the MR temporarily unapproved
  (`detailed_merge_status` `approvals_syncing`) and MergeRequestResetApprovalsWorker deletes the
  approvals 10 seconds later (`perform_in(10.seconds)`); until then GET .../approvals still lists
  them (GitLab: ee/app/services/ee/merge_requests/refresh_service.rb,
  ee/app/services/merge_requests/reset_approvals_service.rb). A head produced by GitLab's own
  rebase (`rebase_commit_sha`) keeps its approvals, with or without asynchronous effects.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from . import repo, trains
from .model import Commit, Job, MergeRequest, Pipeline, Project

if TYPE_CHECKING:
    from .state import State

KINDS = ("attach_head_pipeline", "mergeability_check", "reset_approvals")


def is_async(state: State, project: Project) -> bool:
    """Whether GitLab's asynchronous effects are on for the project."""
    return state.async_effects if project.async_effects is None else project.async_effects


def schedule(
    state: State,
    project: Project,
    mr: MergeRequest,
    kind: str,
    seconds: float,
    payload: tuple[int, ...] = (),
) -> Job:
    """Queues a piece of GitLab's asynchronous work for the MR, due `seconds` from now."""
    job = Job(
        state.clock() + timedelta(seconds=seconds),
        state.next_id("job"),
        kind,
        project.id,
        mr.iid,
        payload,
    )
    state.jobs.append(job)
    return job


def run(state: State, job: Job) -> None:
    """Does one queued job (it leaves the queue)."""
    state.jobs.remove(job)
    project = state.projects[job.project_id]
    mr = project.mrs[job.mr_iid]
    if job.kind == "attach_head_pipeline":
        attach_head_pipeline(state, project, mr)
    elif job.kind == "mergeability_check":
        mr.merge_check = None
    else:
        mr.approvals = [uid for uid in mr.approvals if uid not in job.payload]
        mr.approvals_syncing = False
    trains.on_change(state, project)  # an MR waiting for its checks may join its merge train


def run_all(
    state: State, kind: str | None = None, project: Project | None = None, iid: int | None = None
) -> int:
    """Does every queued job (of one kind, project or MR) now, whatever the clock says, in the
    order they were queued; how many."""
    chosen = [
        job
        for job in sorted(state.jobs, key=lambda j: (j.due, j.seq))
        if kind in {None, job.kind}
        and (project is None or job.project_id == project.id)
        and iid in {None, job.mr_iid}
    ]
    for job in chosen:
        run(state, job)
    return len(chosen)


def matches_head(pipeline: Pipeline, sha: str) -> bool:
    """GitLab's `matches_sha_or_source_sha?`: a pipeline for the head, or a merged results
    pipeline built from it."""
    return sha in {pipeline.sha, pipeline.source_sha}


def attach_head_pipeline(state: State, project: Project, mr: MergeRequest) -> None:
    """MergeRequest#update_head_pipeline: the newest MR pipeline for the current head (its `sha`
    or `source_sha`) becomes the head pipeline; nothing changes when there is none."""
    found = state.head_pipeline(project, mr)
    if found is not None:
        mr.head_pipeline_id = found.id


def shown_head_pipeline(state: State, project: Project, mr: MergeRequest) -> Pipeline | None:
    """The pipeline the MR API's `head_pipeline` shows (`head_pipeline_id`)."""
    if not is_async(state, project):
        return state.head_pipeline(project, mr)
    return project.pipelines.get(mr.head_pipeline_id) if mr.head_pipeline_id else None


def diff_head_pipeline(state: State, project: Project, mr: MergeRequest) -> Pipeline | None:
    """MergeRequest#diff_head_pipeline: the head pipeline if it ran for the current head (the
    one GitLab's CI merge check judges)."""
    shown = shown_head_pipeline(state, project, mr)
    return shown if shown is not None and matches_head(shown, mr.sha) else None


def mark_unchecked(state: State, project: Project, mr: MergeRequest) -> None:
    """A push to the MR's source or target branch (`mark_as_unchecked`), with its recheck
    queued `mergeability_check_seconds` later."""
    if mr.state != "opened" or not is_async(state, project):
        return
    mr.merge_check = "unchecked"
    schedule(state, project, mr, "mergeability_check", state.mergeability_check_seconds)


def read_for_recheck(mr: MergeRequest) -> None:
    """A read of the MR asks GitLab to recheck an unchecked one: it shows `checking` now."""
    if mr.merge_check == "unchecked":
        mr.merge_check = "checking"


def check_now(state: State, project: Project, mr: MergeRequest) -> None:
    """The merge call checks mergeability synchronously (`mergeable?` runs
    `check_mergeability`): a pending check is done now."""
    if mr.merge_check is not None:
        run_all(state, "mergeability_check", project, mr.iid)
        mr.merge_check = None


def reset_approvals_on_push(state: State, project: Project, mr: MergeRequest, sha: str) -> None:
    """`reset_approvals_on_push` after the MR's head moved to `sha`: at once, or (asynchronous)
    marked `approvals_syncing` with the approvals given so far deleted when the worker runs."""
    if not project.reset_approvals_on_push or mr.rebase_commit_sha == sha:
        return
    if not is_async(state, project):
        mr.approvals.clear()
        return
    mr.approvals_syncing = True
    schedule(
        state, project, mr, "reset_approvals", state.approval_reset_seconds, tuple(mr.approvals)
    )


def squash_on_merge(project: Project, mr: MergeRequest) -> bool:
    """MergeRequest#squash_on_merge?: the project's `squash_option` "always" or "never" wins,
    else the MR's `squash` (GitLab: app/models/merge_request.rb)."""
    if project.squash_option in {"always", "never"}:
        return project.squash_option == "always"
    return mr.squash


# -- merged results pipelines ---------------------------------------------------------------


def merged_results(state: State, project: Project) -> bool:
    """Whether MR pipelines run on the merge ref: "Merged results pipelines" on, with the
    licence (Premium)."""
    return state.edition == "premium" and project.merge_pipelines_enabled


def merge_ref(state: State, project: Project, mr: MergeRequest) -> Commit | None:
    """The merge-ref commit (`refs/merge-requests/:iid/merge`) MergeRequests::MergeToRefService
    writes: parents [target head, MR head], the MR's changes applied to the target. None when
    the two conflict (GitLab then runs a detached pipeline on the head instead; GitLab:
    ee/app/services/ee/merge_requests/create_pipeline_service.rb,
    app/services/merge_requests/mergeability_check_service.rb `outdated_merge_ref?`)."""
    target = project.branches.get(mr.target_branch)
    if target is None or state.has_conflicts(project, mr):
        return None
    tree = repo.combined_tree(state.commits, mr.sha, target)
    message = (
        f"Merge branch '{mr.source_branch}' into '{mr.target_branch}'\n\n{mr.title}\n\n"
        f"See merge request {project.path}!{mr.iid}"
    )
    commit = state.make_commit((target, mr.sha), tree, message, mr.author_id)
    mr.merge_ref_sha = commit.sha
    return commit


def source_ref(project: Project, pipeline: Pipeline) -> str:
    """Ci::Pipeline#source_ref, the Pipeline Hook's `ref`: an MR pipeline's source branch (for
    detached, merged results and merge train pipelines alike), else the pipeline's ref."""
    mr = project.mrs.get(pipeline.mr_iid) if pipeline.mr_iid else None
    return mr.source_branch if mr is not None else pipeline.ref
