"""The deployment pipeline's callback: `{project_id, mr_iid, status, operation_id?, sha?}`.

Also which secret authenticates it: a project named in GITOPS_DEPLOY_SECRETS (by casefolded
path or numeric id) has its own, and the global GITOPS_DEPLOY_SECRET does not work for it; any
other project uses the global one. The web tier records the scope that authenticated a delivery
in a header of its own (SCOPE_HEADER, never one a client can set), and processing refuses a
callback whose operation belongs to a project with its own secret but came in under another.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

from bot.ingress.jsonload import Unusable, load_object

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_ID = re.compile(r"^[A-Za-z0-9._:/-]{1,255}$")
#: Project ids and MR iids are 32-bit INTEGER columns in the database.
MAX_PROJECT_ID = MAX_IID = 2**31 - 1
#: Operation ids are UUIDs; the columns that keep them are 36 wide.
MAX_OPERATION_ID = 36

#: The header stored with a deploy delivery naming the secret that authenticated it.
SCOPE_HEADER = "X-Gitops-Deploy-Scope"
#: The scope of the global GITOPS_DEPLOY_SECRET.
GLOBAL_SCOPE = "global"
_PROJECT_SCOPE = "project:"


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
    project_id = _project(data.get("project_id"))
    mr_iid = data.get("mr_iid")
    if isinstance(mr_iid, bool) or not isinstance(mr_iid, int):
        raise Unusable("mr_iid: expected a positive integer")
    if not 1 <= mr_iid <= MAX_IID:
        raise Unusable(f"mr_iid: out of range (1..{MAX_IID})")
    status = data.get("status")
    if status not in ("success", "failed"):
        raise Unusable("status: expected 'success' or 'failed'")
    operation_id = data.get("operation_id")
    if operation_id is not None and (
        not isinstance(operation_id, str)
        or len(operation_id) > MAX_OPERATION_ID
        or not _ID.match(operation_id)
    ):
        raise Unusable("operation_id: expected an operation id")
    sha = data.get("sha")
    if sha is not None and (not isinstance(sha, str) or not _SHA.match(sha)):
        raise Unusable("sha: expected a hex commit SHA")
    return DeployCallback(project_id, mr_iid, status, operation_id, sha)


def _project(project: object) -> str:
    """project_id as text: a path, or a numeric id in the database's range."""
    if isinstance(project, bool) or not isinstance(project, int | str) or not str(project):
        raise Unusable("project_id: expected an id or a path")
    if isinstance(project, int) or project.isdigit():
        if not project_number_ok(str(project)):
            raise Unusable(f"project_id: out of range (1..{MAX_PROJECT_ID})")
        return str(int(project))
    if not _ID.match(project):
        raise Unusable("project_id: unexpected characters")
    return project


def project_number_ok(text: str) -> bool:
    """True for the decimal digits of a project id the database can hold (1..2**31-1)."""
    return (
        text.isascii() and text.isdigit() and len(text) <= 10 and 1 <= int(text) <= MAX_PROJECT_ID
    )


def project_key(project: object) -> str | None:
    """The GITOPS_DEPLOY_SECRETS key a body's project_id names (casefolded), if it names one."""
    if isinstance(project, bool) or not isinstance(project, int | str):
        return None
    text = str(project).strip().casefold()
    return text or None


def scope_for_body(body: bytes, secrets: Mapping[str, str]) -> str:
    """The scope whose secret must authenticate this body: its project's own, else global.

    Read before authentication, so only as far as the project_id (an unreadable body is
    authenticated with the global secret and then quarantined as usual).
    """
    if not secrets:
        return GLOBAL_SCOPE
    try:
        key = project_key(load_object(body, max_depth=4).get("project_id"))
    except Unusable:
        return GLOBAL_SCOPE
    return _PROJECT_SCOPE + key if key is not None and key in secrets else GLOBAL_SCOPE


def secret_of(scope: str, secrets: Mapping[str, str], global_secret: str) -> str:
    """The secret a scope stands for ("" when it is not configured: nothing authenticates)."""
    if scope.startswith(_PROJECT_SCOPE):
        return secrets.get(scope[len(_PROJECT_SCOPE) :], "")
    return global_secret


@dataclass(frozen=True, slots=True)
class DeployAuth:
    """Which secret authenticated a stored callback, and the secrets configured now."""

    scope: str = GLOBAL_SCOPE
    secrets: Mapping[str, str] | None = None
    global_secret: str = ""

    def refusal(self, project: str, project_id: int | None) -> str | None:
        """Why this callback may not act on an operation of that project (None: it may).

        A project with its own secret (under its path or its numeric id) accepts only a
        callback authenticated with that secret; any other project accepts any scope.
        """
        secrets = self.secrets or {}
        names = {project.casefold()} | ({str(project_id)} if project_id is not None else set())
        own = {secrets[name] for name in names if name in secrets}
        if not own:
            return None
        used = secret_of(self.scope, secrets, self.global_secret).encode()
        if used and any(hmac.compare_digest(used, secret.encode()) for secret in own):
            return None
        return (
            f"authenticated with the {self.scope} deploy secret, but project {project} has its own"
        )
