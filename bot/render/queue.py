"""The merge queue in words: where a change stands in its branch's line (bot/store/queue.py), for
the status comment, the dashboard and `gitops-bot queue`."""

from __future__ import annotations

from bot.store.queue import Place

#: The words the status comment adds to a position that can change without the comment being
#: written again (it is re-rendered when its own change moves, not when others leave the line).
WRITTEN = " when this comment was written"


def ordinal(n: int) -> str:
    """`1st`, `2nd`, `3rd`, `4th`, `11th`, `12th`, `13th`, `21st`, `111th`, `122nd`."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def place_words(place: Place, branch: str, *, when: str = "") -> str:
    """Where the change stands, with `branch` as the caller shows it (a code span in Markdown):
    "first in line for main: merging next", "3rd in line for main (2 ahead)", or, waiting on
    its own pipeline, "2nd in line for main, waiting for its pipeline; the next change goes
    ahead". `when` (WRITTEN) follows a position that may have changed since (the head's comment
    is written again when it becomes the head and when an operator promotes another)."""
    at = "first" if place.position == 1 else ordinal(place.position)
    ahead = place.position - 1
    if place.is_head:
        if not ahead:
            return f"first in line for {branch}: merging next"
        waiting = (
            "the change ahead waits for its pipeline"
            if ahead == 1
            else f"the {ahead} changes ahead wait for their pipelines"
        )
        return f"{at} in line for {branch}: merging next; {waiting}"
    if place.paused:
        behind = "; the next change goes ahead" if place.position < place.size else ""
        return f"{at} in line for {branch}{when}, waiting for its pipeline{behind}"
    return f"{at} in line for {branch}{when} ({ahead} ahead)"


def place_text(place: Place) -> str:
    """Where the change stands now, in plain text with the line's length (the CLI's `show` and
    the dashboard's page of one change): "3rd in line for main (2 ahead); 4 in line"."""
    return f"{place_words(place, place.target_branch)}; {place.size} in line"
