"""What the bot writes about a change for people to read: the description of the MR it opens (the
requester's text, quoted and inert), and the approval request's title, applicant and text."""

from __future__ import annotations

from bot.core.inert import normalise_breaks, quote_block, show_hidden, single_line
from bot.render.markdown import code, md_escape

#: Where the requester's own words start in an approval request (everything above is the bot's).
REQUESTER_HEADING = "Description by the requester (their words, not checked by gitops-bot):"


def mr_description(description: str, requested_by: str, operation_id: str) -> str:
    """The requester's description as a quoted code block (nothing in it runs, renders or
    mentions anyone), then who asked for the change and its operation id."""
    footer = (
        f"Requested by {md_escape(requested_by)} through gitops-bot "
        f"(operation {code(operation_id)})."
    )
    quoted = quote_block(description)
    return f"{quoted}\n\n{footer}" if quoted else footer


def plain(text: str) -> str:
    """Text for the approval system: line breaks as LF, every other control, format or
    separator character (bidi overrides, CR, zero-width) shown as `[U+XXXX]`."""
    return show_hidden(normalise_breaks(text))


def approval_description(summary: list[str], description: str) -> str:
    """The approval request's text: the bot's summary first (what is approved: the target, every
    path, the preview and how much of the change it shows), then the requester's description,
    each of its lines marked `| ` so that none can pass for the bot's (a requester imitating a
    preview stays visibly theirs), with nothing hidden in either."""
    parts = [plain(part) for part in summary if part.strip()]
    own = plain(description).strip("\n")
    if own.strip():
        quoted = "\n".join(f"| {line}" for line in own.split("\n"))
        parts.append(f"{REQUESTER_HEADING}\n{quoted}")
    return "\n\n".join(parts)


def approval_line(text: str) -> str:
    """A title or applicant for the approval system: one line, nothing hidden, at most 255."""
    return single_line(text, 255)
