"""Everything that can happen to an operation: the events the transition table accepts."""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    """An input to the state machine (webhook, job, command, reconciliation, operator)."""

    # start: a new request, a re-apply, or a revert of a merged change
    SUBMIT = "submit"
    REVERT = "revert"
    OVERLOADED = "overloaded"
    # approval system
    APPROVAL_SUBMITTED = "approval_submitted"
    APPROVAL_SUBMIT_FAILED = "approval_submit_failed"
    APPROVAL_TIMED_OUT = "approval_timed_out"
    APPROVED = "approved"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"
    REQUEST_APPROVAL = "request_approval"
    # creation
    MR_OPENED = "mr_opened"
    CREATE_ERROR = "create_error"
    PATH_REFUSED = "path_refused"
    #: a changed file fails its validators (syntax, JSON Schema): nobody is asked to approve
    CHECKS_FAILED = "checks_failed"
    # the MR's check pipeline
    PIPELINE_PASSED = "pipeline_passed"
    PIPELINE_FAILED = "pipeline_failed"
    PIPELINE_TIMED_OUT = "pipeline_timed_out"
    # handling
    HANDLE_START = "handle_start"
    APPROVALS_GIVEN = "approvals_given"
    APPROVE_ERROR = "approve_error"
    REBASE_STARTED = "rebase_started"
    REBASE_CONFLICT = "rebase_conflict"
    MERGE_ERROR = "merge_error"
    CHANGED_AFTER_APPROVAL = "changed_after_approval"
    MERGED = "merged"
    # validation: the deployment pipeline's word
    DEPLOYED = "deployed"
    DEPLOY_FAILED = "deploy_failed"
    DEPLOY_TIMED_OUT = "deploy_timed_out"
    # people and operators
    MR_CLOSED = "mr_closed"
    CANCEL = "cancel"
    RETRY = "retry"
    DEADLINE_EXPIRED = "deadline_expired"


class Source(StrEnum):
    """Where an event came from; recorded in the audit log."""

    API = "api"
    WEBHOOK = "webhook"
    JOB = "job"
    COMMAND = "command"
    RECONCILE = "reconcile"
    SWEEP = "sweep"
    OPERATOR = "operator"
