"""Text the bot writes for people: the MR's status comment, rendered from templates/.

bot/render/templates.py makes every Jinja environment the product uses (the Markdown one for
GitLab, the HTML one for the dashboard); bot/render/markdown.py has the Markdown inert rules.
"""

from __future__ import annotations

from bot.render.status import StatusView, TimelineEntry, load_status, render_status

__all__ = ["StatusView", "TimelineEntry", "load_status", "render_status"]
