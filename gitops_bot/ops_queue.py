"""The operator's `queue`: every branch's merge queue, and `queue promote` (bot/app/promote.py)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.app.promote import Promotion
from bot.render.queue import place_words
from bot.store.queue import InLine, by_line, head_of
from gitops_bot.ops import table
from webhooks.pages import utc

#: What `gitops-bot queue` says when no change waits to merge.
EMPTY = "the merge queues are empty: no change is waiting to merge"
#: The note on a change that waits on its own pipeline and lets the next go ahead.
PAUSED = "paused (pipeline pending)"


def queue_text(entries: Sequence[InLine]) -> str:
    """Each line (project and branch), head first: position, operation, MR, step, entry time,
    and which change merges next or waits on its pipeline."""
    if not entries:
        return EMPTY
    blocks = []
    for entries_of_line in by_line(entries):
        first = entries_of_line[0]
        head = head_of(entries_of_line)
        rows = [
            [
                str(e.position),
                e.operation_id,
                "-" if e.mr_iid is None else f"!{e.mr_iid}",
                e.step.name,
                utc(e.entered_at),
                PAUSED if e.paused else "merges next" if e.operation_id == head else "",
            ]
            for e in entries_of_line
        ]
        header = ["POS", "OPERATION", "MR", "STEP", "ENTERED (UTC)", "NOTE"]
        blocks.append(
            f"{first.project} -> {first.target_branch}: {len(rows)} in line\n" + table(header, rows)
        )
    return "\n\n".join(blocks)


def promote_text(operation_id: str, promotion: Promotion) -> str:
    """One line: where the promoted change stands now, then how the line goes on."""
    place = promotion.place
    return (
        f"promoted: {operation_id} is now {place_words(place, place.target_branch)} "
        f"({place.size} in line); {promotion.follow_up}"
    )
