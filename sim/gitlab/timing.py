"""GitLab's own clocked work: pipelines that take a fixed time, rebases that take a fixed time.

With `pipeline_seconds` set, a running MR pipeline finishes (`pipeline_result`, "success" by
default) that many seconds of the double's clock after it started, and its Pipeline Hook goes
out then; with `rebase_seconds` set, a queued rebase completes that many seconds after it was
queued (moving the source branch: new head, new pipeline, MR Hook); with asynchronous effects
(flow.py), GitLab's jobs (head pipeline attach, mergeability check, approval reset) fall due
their own delays after what queued them. A timed pipeline left `canceling` ends `canceled`
(its `after_script`s done). Nothing runs by itself:
the caller moves the double's clock and calls `run_due`, which does, in time order, everything
due by now; `next_due` says when the next thing falls due, so a simulation can jump there.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from . import flow, mr_ops
from .model import RUNNING_STATUSES, Job, MergeRequest, Pipeline, Project

if TYPE_CHECKING:
    from .state import State

#: (when, tie-break, project, pipeline, MR or job) of one piece of clocked work
Due = tuple[datetime, int, Project, Pipeline | MergeRequest | Job]


def pending(state: State) -> list[Due]:
    """Every piece of clocked work not done yet, soonest first."""
    found: list[Due] = []
    for project in state.projects.values():
        if state.pipeline_seconds is not None:
            wait = timedelta(seconds=state.pipeline_seconds)
            for pipeline in project.pipelines.values():
                if pipeline.status in RUNNING_STATUSES:
                    start = pipeline.started_at or pipeline.created_at
                    found.append((start + wait, pipeline.id, project, pipeline))
        if state.rebase_seconds is not None:
            wait = timedelta(seconds=state.rebase_seconds)
            for mr in project.mrs.values():
                if mr.rebase_in_progress and mr.rebase_started_at is not None:
                    found.append((mr.rebase_started_at + wait, mr.id, project, mr))
    for job in state.jobs:
        found.append((job.due, job.seq, state.projects[job.project_id], job))
    return sorted(found, key=lambda due: (due[0], due[1]))


def next_due(state: State) -> datetime | None:
    """When the next piece of clocked work falls due (None: nothing is waiting)."""
    waiting = pending(state)
    return waiting[0][0] if waiting else None


def run_due(state: State) -> int:
    """Does every piece of clocked work due by the clock's now, in time order (work it starts
    that is due by now too, e.g. with a duration of 0); how many pieces were done."""
    done = 0
    while True:
        now = state.clock()
        due = [item for item in pending(state) if item[0] <= now]
        if not due:
            return done
        _, _, project, thing = due[0]
        if isinstance(thing, Pipeline):
            result = "canceled" if thing.status == "canceling" else state.pipeline_result
            state.set_pipeline_status(project, thing, result)
        elif isinstance(thing, Job):
            flow.run(state, thing)
        else:
            mr_ops.complete_rebase(state, project, thing)
        done += 1
