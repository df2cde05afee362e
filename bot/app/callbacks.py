"""Completion callbacks: an outbox row's phase change told to its submitter's callback_url.

fire() writes the row (one per operation and phase, bot/store/fire.py) when the operation has
a callback_url; the outbox dispatcher (bot/app/outbox.py) calls `deliver` with its retries,
back-off and dead rows, one row of an operation at a time in phase order (bot/store/outbox.py's
claim). Every delivery of a row carries the same id, `<operation id>:<phase>`, so a receiver
that keeps the ids it has seen sees each phase once. The protocol: README, "Completion
callbacks".
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.config import Settings
from bot.core.callbacks import delivery_id, refusal
from bot.core.hints import hint_for
from bot.core.states import BindingState, Step
from bot.errors import CannotProceed
from bot.notify import post_callback, signed_headers
from bot.render.status import StatusView
from bot.store.outbox import CallbackTarget, Claimed


def callback_body(
    view: StatusView, target: CallbackTarget, payload: dict[str, Any]
) -> dict[str, Any]:
    """The JSON a receiver gets for one phase change (README, "Completion callbacks")."""
    phase = BindingState(payload["phase"])
    step = Step(payload["step"])
    return {
        "delivery_id": delivery_id(view.operation_id, phase.value),
        "operation_id": view.operation_id,
        "phase": phase.value,
        "previous_phase": payload.get("previous_phase"),
        "state": hint_for(phase, step).kind,
        "step": step.name,
        "at": payload["at"],
        "change": {
            "project": view.project,
            "target_branch": target.target_branch,
            "subject_id": view.subject_id,
            "target_key": view.target_key,
            "title": view.title,
            "mr_url": view.mr_url,
        },
    }


def deliver(
    settings: Settings,
    view: StatusView,
    target: CallbackTarget | None,
    row: Claimed,
    now: datetime,
) -> str | None:
    """Sends one callback row; a note when there was nothing to send. Raises CannotProceed
    when it may not be sent (no secret, the host no longer allowed) and what post_callback
    raises."""
    if target is None:
        return "skipped: the operation has no callback_url"
    if not settings.callback_secret:
        raise CannotProceed("GITOPS_CALLBACK_SECRET is unset: callbacks cannot be signed")
    why = refusal(target.url, settings.callback_hosts)
    if why is not None:
        # the allow-list changed since the submission: checked again at every send
        raise CannotProceed(f"callback_url {why}")
    body = callback_body(view, target, dict(row.payload or {}))
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
    headers = signed_headers(
        settings.callback_secret, int(now.timestamp()), raw, body["delivery_id"]
    )
    post_callback(target.url, raw, headers, timeout=settings.callback_timeout)
    return None
