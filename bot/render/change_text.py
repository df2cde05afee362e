"""The description of the MR the bot opens for a change: the requester's text, quoted and inert."""

from __future__ import annotations

from bot.core.inert import quote_block
from bot.render.markdown import code, md_escape


def mr_description(description: str, requested_by: str, operation_id: str) -> str:
    """The requester's description as a quoted code block (nothing in it runs, renders or
    mentions anyone), then who asked for the change and its operation id."""
    footer = (
        f"Requested by {md_escape(requested_by)} through gitops-bot "
        f"(operation {code(operation_id)})."
    )
    quoted = quote_block(description)
    return f"{quoted}\n\n{footer}" if quoted else footer
