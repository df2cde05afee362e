"""An in-memory GitLab for tests and the demo (REST v4 subset, webhooks, faults).

double = GitLabDouble()
double.add_project("platform/config", files={"config/prod.yaml": "replicas: 2\n"})
double.add_user("bot", token="t", access={"platform/config": Access.DEVELOPER})
with double.mocked():                 # python-gitlab / requests through `responses`
    gitlab.Gitlab("https://gitlab.example.com", private_token="t").auth()
with double.serve() as base_url:      # or a real threaded server on 127.0.0.1
    ...

GitLab releases differ: `GitLabDouble(version="16.11")` (or `double.version = ...`) answers as
that release (versions.py: "15.11", "16.11", "17.5", "17.11", "19.5"; the default "sim" keeps
what the double answered before profiles); `hook_auto_disabling` and `require_sha_for_merge`
are the instance and group settings that go with them.

People's moves on demand: `push`, `force_push` (history rewritten), `retarget`, `approve_as`,
`add_note`, ...; `protect_branch` and the protected branches API (`edition = "ce"` for a GitLab
without per-user entries), enforced on commits, branches, merges, rebases and pushes. Merge
trains (`set_merge_trains`, the Merge Trains API, `train`): see `trains.py`.
"""

from __future__ import annotations

from .app import HungCall
from .double import GitLabDouble
from .errors import ApiError
from .faults import Call, FaultRule
from .model import (
    Access,
    AccessEntry,
    Deployment,
    Hook,
    MergeRequest,
    Note,
    Pipeline,
    Project,
    ProtectedBranch,
    TrainCar,
    User,
)
from .webhooks import Delivery

__all__ = [
    "Access",
    "AccessEntry",
    "ApiError",
    "Call",
    "Delivery",
    "Deployment",
    "FaultRule",
    "GitLabDouble",
    "Hook",
    "HungCall",
    "MergeRequest",
    "Note",
    "Pipeline",
    "Project",
    "ProtectedBranch",
    "TrainCar",
    "User",
]
