"""Group commit for the ack path: deliveries that arrive together share one INSERT and one job.

Each web thread still answers only after its own delivery is committed (GitLab gets its 2xx
for a stored delivery, never before). What changes is who does the work: the first thread to
arrive leads and stores whatever is waiting when it starts, in one statement and one commit,
then enqueues the new rows as one job; threads that arrive meanwhile wait for the next leader,
which is one of them. Nothing waits on a timer: a lone delivery is stored at once, alone, and
batches form only while a commit is in flight, which is exactly when they save something.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.ingress import inbox
from bot.ingress.inbox import Delivery, StoredDelivery
from bot.queueing import INBOX_JOB, QueueUnavailable, WorkQueue
from bot.store.engine import Engine

#: At most this many deliveries per statement (bounds one commit's size and one job's work).
MAX_BATCH = 32


@dataclass(frozen=True, slots=True)
class DeliveryAck:
    """What happened to one delivery: stored (or a duplicate), and whether its job is queued."""

    stored: StoredDelivery
    #: False when the queue was down: the sweep enqueues the row later
    enqueued: bool


class _Waiter:
    """One delivery waiting for a leader to store it, or to become the leader."""

    __slots__ = ("delivery", "done", "error", "lead", "result")

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.done = threading.Event()
        self.lead = False
        self.result: DeliveryAck | None = None
        self.error: Exception | None = None


class GroupCommit:
    """Stores and enqueues deliveries from many threads of one process, batched as they come."""

    def __init__(
        self,
        engine: Callable[[], Engine],
        queue: Callable[[], WorkQueue],
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._engine = engine
        self._queue = queue
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._pending: list[_Waiter] = []
        self._leading = False
        #: batches flushed and deliveries in them (for the benchmark and the tests)
        self.batches = 0
        self.deliveries = 0

    def submit(self, delivery: Delivery) -> DeliveryAck:
        """Stores `delivery` (and enqueues it when new and usable); raises what storing raised."""
        me = _Waiter(delivery)
        with self._lock:
            self._pending.append(me)
            me.lead = not self._leading
            self._leading = True
        if not me.lead:
            me.done.wait()
        if me.lead:
            self._lead()
        if me.error is not None:
            raise me.error
        assert me.result is not None
        return me.result

    def _lead(self) -> None:
        """Flushes one batch (which holds the leader's own delivery), then hands over."""
        with self._lock:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
        try:
            self._flush(batch)
        finally:
            with self._lock:
                successor = self._pending[0] if self._pending else None
                if successor is None:
                    self._leading = False
                else:
                    successor.lead = True
            for waiter in batch:
                waiter.lead = False
                waiter.done.set()
            if successor is not None:
                successor.done.set()

    def _flush(self, batch: Sequence[_Waiter]) -> None:
        """One INSERT for the batch, one job for its new rows; results or the error to each."""
        try:
            stored = inbox.store_many(self._engine(), [waiter.delivery for waiter in batch])
        except Exception as exc:  # noqa: BLE001 - each waiter re-raises it, as its own
            for waiter in batch:
                waiter.error = exc
            return
        self.batches += 1
        self.deliveries += len(batch)
        new_ids = [
            row.inbox_id
            for waiter, row in zip(batch, stored, strict=True)
            if row.inbox_id is not None and waiter.delivery.status == "received"
        ]
        enqueued = True
        if new_ids:
            try:
                self._queue().enqueue(INBOX_JOB, *new_ids)
            except QueueUnavailable:
                enqueued = False
        for waiter, row in zip(batch, stored, strict=True):
            waiter.result = DeliveryAck(row, enqueued)
