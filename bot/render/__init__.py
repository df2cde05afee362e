"""Text the bot writes for people: the MR's status comment, rendered from templates/."""

from __future__ import annotations

from bot.render.status import StatusView, TimelineEntry, load_status, render_status

__all__ = ["StatusView", "TimelineEntry", "load_status", "render_status"]
