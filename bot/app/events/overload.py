"""The one overload bound for everything that creates a request (the API and `/gitops apply`)."""

from __future__ import annotations

from bot.queueing import QueueUnavailable, WorkQueue
from bot.store.engine import Engine
from bot.store.flags import get_flag

#: What a person is told when the bound refuses a new request.
QUEUE_FULL = "the work queue is full"


def queue_full(engine: Engine, queue: WorkQueue) -> bool:
    """The queue is at its bound (flag `queue.max_length`, read each time); an unreachable
    queue does not count (the sweep carries the work once it is back)."""
    try:
        waiting = queue.length()
    except QueueUnavailable:
        return False
    return waiting >= int(get_flag(engine, "queue.max_length"))
