"""The deployment pipeline's callback: `{project_id, mr_iid, status, operation_id?, sha?}`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.ingress.jsonload import Unusable, load_object

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_ID = re.compile(r"^[A-Za-z0-9._:/-]{1,255}$")


@dataclass(frozen=True, slots=True)
class DeployCallback:
    """The deployment's word on one merged change."""

    project_id: str
    mr_iid: int
    status: str
    operation_id: str | None = None
    sha: str | None = None


def parse_deploy(body: bytes) -> DeployCallback:
    """The callback's fields; raises Unusable with the reason for anything else."""
    data = load_object(body, max_depth=4)
    project = data.get("project_id")
    if isinstance(project, bool) or not isinstance(project, int | str) or not str(project):
        raise Unusable("project_id: expected an id or a path")
    project_id = str(project)
    if not _ID.match(project_id):
        raise Unusable("project_id: unexpected characters")
    mr_iid = data.get("mr_iid")
    if isinstance(mr_iid, bool) or not isinstance(mr_iid, int) or not 0 < mr_iid < 2**31:
        raise Unusable("mr_iid: expected a positive integer")
    status = data.get("status")
    if status not in ("success", "failed"):
        raise Unusable("status: expected 'success' or 'failed'")
    operation_id = data.get("operation_id")
    if operation_id is not None and (
        not isinstance(operation_id, str) or not _ID.match(operation_id)
    ):
        raise Unusable("operation_id: expected an operation id")
    sha = data.get("sha")
    if sha is not None and (not isinstance(sha, str) or not _SHA.match(sha)):
        raise Unusable("sha: expected a hex commit SHA")
    return DeployCallback(project_id, mr_iid, status, operation_id, sha)
