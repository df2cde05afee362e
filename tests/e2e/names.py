"""The e2e world's names: the project, the accounts, the secrets, the timings and the paths
each step order takes (shared by world.py and its command views)."""

from __future__ import annotations

from bot.core.states import Flow

PROJECT = "platform/config"
FILE = "config/prod.yaml"
API_TOKEN = "e2e-api-token"
SECRETS = {"webhook": "e2e-hook-secret", "approval": "e2e-approval-secret", "deploy": "e2e-deploy"}
#: The project hook GitLab has for the bot (the relay sends it to the web instances in turn).
BOT_HOOK = "http://bot.e2e.test/webhooks/gitlab"
#: The bot's GitLab accounts in the double.
AUTHOR, APPROVERS = "gitops-bot", ("approver-1", "approver-2")
#: Small timings, so that recovery happens in seconds (seconds; see README "Configuration").
TIMINGS = {
    "GITOPS_SWEEP_INTERVAL": "1",
    "GITOPS_STEP_TIMEOUT": "4",
    "GITOPS_PIPELINE_TIMEOUT": "120",
    "GITOPS_RECONCILE_INTERVAL": "1",
    "GITOPS_RECONCILE_MIN_AGE": "2",
    "GITOPS_RECONCILE_MAX_AGE": "3600",
}
#: Dynamic flags for short polls (the defaults poll every 10 s at first).
FLAGS = {
    "poll.pipeline_tiers": [[1, 120]],
    "poll.rebase_tiers": [[1, 60]],
    "poll.covered_tiers": [[1, 120]],
    "poll.covered_rebase_tiers": [[1, 60]],
    "poll.merge_tiers": [[1, 120]],
    "poll.train_tiers": [[1, 120]],
}
#: How long a scenario waits for the bot to reach a state.
SETTLE = 60.0

#: The path each order takes, as (from, to, event) in the audit log.
PATHS = {
    Flow.APPROVE_FIRST: [
        (None, "APPROVAL_SENDING", "submit"),
        ("APPROVAL_SENDING", "APPROVAL_SENT", "approval_submitted"),
        ("APPROVAL_SENT", "MR_CREATING", "approved"),
        ("MR_CREATING", "MR_CREATING", "mr_opened"),
        ("MR_CREATING", "MR_CREATED", "pipeline_passed"),
        ("MR_CREATED", "MERGING", "handle_start"),
        ("MERGING", "MERGING", "approvals_given"),
        ("MERGING", "MERGED", "merged"),
        ("MERGED", "VALIDATED", "deployed"),
    ],
    Flow.MR_FIRST: [
        (None, "MR_CREATING", "submit"),
        ("MR_CREATING", "MR_CREATING", "mr_opened"),
        ("MR_CREATING", "MR_CREATED", "pipeline_passed"),
        ("MR_CREATED", "APPROVAL_SENDING", "request_approval"),
        ("APPROVAL_SENDING", "APPROVAL_SENT", "approval_submitted"),
        ("APPROVAL_SENT", "MERGING", "approved"),
        ("MERGING", "MERGING", "approvals_given"),
        ("MERGING", "MERGED", "merged"),
        ("MERGED", "VALIDATED", "deployed"),
    ],
}

#: What one request leaves in GitLab and the approval system: one of each, one approval per bot.
ONE_EACH = {
    "mrs": 1,
    "merges": 1,
    "approvals": dict.fromkeys(APPROVERS, 1),
    "comments": 1,
    "approval_requests": 1,
}
