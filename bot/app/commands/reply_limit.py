"""One reply per user and MR per window: the bot's note rate limit is kept for status comments.

Anyone who can comment (members or not) could otherwise make the author account post without
end (`/gitops help`, refusals), spending the GitLab note rate limit the status comments need.
A reply is posted only after `claim_reply` took the user's slot on the MR, in one statement
that two workers at once cannot both win (bot/store/replies.py). The emoji reaction is never
limited.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.store.engine import Engine
from bot.store.models import utcnow
from bot.store.replies import claim_slot


def claim_reply(
    engine: Engine,
    *,
    project_id: int,
    mr_iid: int,
    user_id: int,
    window: float,
    now: datetime | None = None,
) -> bool:
    """Takes the user's reply slot on the MR; False when they had a reply within `window`
    seconds (then no reply may be posted)."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=window)
    return claim_slot(
        engine, project_id=project_id, mr_iid=mr_iid, user_id=user_id, now=now, cutoff=cutoff
    )
