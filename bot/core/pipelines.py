"""One judgement of a pipeline for an MR's head, for the webhook and the poll alike.

GitLab's pipeline statuses (app/models/concerns/ci/has_status.rb): a pipeline that `success`ed
passes; `failed`, `canceled` and `skipped` never will (GitLab's own merge check, `ci_must_pass`,
counts each as "not succeeded" -- a canceled pipeline is not retried by itself, so waiting on it
would wait for a person); every other status (`created`, `waiting_for_resource`, `preparing`,
`pending`, `running`, `scheduled`, `manual`, and the newer `waiting_for_callback`, 16.6, and
`canceling`, 17.0, which ends in `canceled` and then fails) is still to be decided: wait.

A pipeline counts for a head only when it ran on that head: its `sha` is the head, or it is a
merged results pipeline, which runs on the merge-ref commit `refs/merge-requests/<iid>/merge`
whose parents are the target's head and the MR's head, in that order (ee/app/services/ee/
merge_requests/create_pipeline_service.rb; MergeRequests::MergeToRefService). The MR's
`head_pipeline` is attached asynchronously after a push (MergeRequests::UpdateHeadPipelineWorker):
until then it is the previous head's pipeline, whose verdict is not this head's.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

PASSED_STATUSES = frozenset({"success"})
FAILED_STATUSES = frozenset({"failed", "canceled", "skipped"})


class PipelineVerdict(StrEnum):
    """What a pipeline says about the head it is judged for."""

    PASSED = "passed"
    FAILED = "failed"
    WAIT = "wait"  # not finished, or no pipeline yet
    OTHER_COMMIT = "other_commit"  # it ran on another commit: says nothing of this head


def judge_status(status: str | None) -> PipelineVerdict:
    """A pipeline's status alone: passed, failed, or still to be decided."""
    if status in PASSED_STATUSES:
        return PipelineVerdict.PASSED
    if status in FAILED_STATUSES:
        return PipelineVerdict.FAILED
    return PipelineVerdict.WAIT


def ran_on(pipeline_sha: str | None, head: str | None, merge_parents: Sequence[str] = ()) -> bool:
    """Whether a pipeline on `pipeline_sha` tested `head`: the same commit, or a merge-ref
    commit (`merge_parents`: its parents, target head first) built from that head."""
    if head is None or pipeline_sha is None:
        return False
    if pipeline_sha == head:
        return True
    return len(merge_parents) == 2 and merge_parents[1] == head


def judge(
    status: str | None,
    pipeline_sha: str | None,
    head: str | None,
    merge_parents: Sequence[str] = (),
) -> PipelineVerdict:
    """The pipeline's verdict on `head`; OTHER_COMMIT when it did not run on it."""
    if status is None:
        return PipelineVerdict.WAIT
    if not ran_on(pipeline_sha, head, merge_parents):
        return PipelineVerdict.OTHER_COMMIT
    return judge_status(status)


def needs_parents(pipeline_sha: str | None, head: str | None) -> bool:
    """Whether the pipeline's commit's parents are needed to tell whether it tested `head`
    (it ran on another commit, which may be a merge-ref commit built from the head)."""
    return pipeline_sha is not None and head is not None and pipeline_sha != head
