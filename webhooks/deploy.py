"""POST /webhooks/deploy: the deployment pipeline's word, by token or signature.

The secret is the body's project's own when GITOPS_DEPLOY_SECRETS names it (the global
GITOPS_DEPLOY_SECRET then does not work for that project), else the global one. The scope that
authenticated the delivery is stored with it (SCOPE_HEADER) for the check at processing time.
"""

from __future__ import annotations

import time

from flask import Blueprint, Response, request

from bot.approval import verify_signature
from bot.approval.errors import SignatureRejected
from bot.ingress.deploy import SCOPE_HEADER, parse_deploy, scope_for_body, secret_of
from bot.ingress.inbox import Delivery, body_key, kept_headers
from bot.ingress.jsonload import Unusable
from webhooks.context import services_of
from webhooks.gitlab import token_ok
from webhooks.ingest import accept, read_body, refuse

bp = Blueprint("deploy_hook", __name__)

SOURCE = "deploy"
EVENT = "deploy_callback"
TOKEN_HEADER = "X-Deploy-Token"
TIMESTAMP_HEADER = "X-Deploy-Timestamp"
SIGNATURE_HEADER = "X-Deploy-Signature"


def _authentic(body: bytes, secret: str) -> bool:
    """A matching X-Deploy-Token, or an HMAC signature made like the approval system's."""
    if request.headers.get(SIGNATURE_HEADER) is not None:
        try:
            verify_signature(
                secret,
                request.headers.get(TIMESTAMP_HEADER),
                body,
                request.headers.get(SIGNATURE_HEADER),
                now=time.time(),
            )
        except SignatureRejected:
            return False
        return True
    return token_ok(request.headers.get(TOKEN_HEADER), secret)


@bp.post("/webhooks/deploy")
def receive() -> Response:
    """Authenticate, store once per body, enqueue, answer."""
    started = time.perf_counter()
    body = read_body()
    settings = services_of().settings
    scope = scope_for_body(body, settings.deploy_secrets)
    if not _authentic(body, secret_of(scope, settings.deploy_secrets, settings.deploy_secret)):
        return refuse(SOURCE, "unauthorized", started, 401, "wrong or missing deploy token")
    key = body_key(SOURCE, EVENT, body)
    headers = {**kept_headers(request.headers), SCOPE_HEADER: scope}
    try:
        parse_deploy(body)
    except Unusable as exc:
        return accept(Delivery(SOURCE, key, EVENT, body, headers, "quarantined", str(exc)), started)
    return accept(Delivery(SOURCE, key, EVENT, body, headers), started)
