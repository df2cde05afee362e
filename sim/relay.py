"""GitLab's hook sender for the double: its queued webhooks POSTed over HTTP, as GitLab would.

Each project hook's URL can be routed to several receivers used in turn (two web instances
behind one hook URL, as behind a load balancer). Tests steer it: pause (deliveries wait, then
arrive late), send every delivery to every receiver at once, or send each one several times
(the same `Idempotency-Key`, as GitLab's "Resend" does).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests

from sim.gitlab import Delivery, GitLabDouble

log = logging.getLogger(__name__)

#: Seconds GitLab waits for a receiver's answer.
DELIVERY_TIMEOUT = 10.0


@dataclass(frozen=True)
class Sent:
    """One POST of a webhook: its kind, where it went, the answer (0: none)."""

    kind: str
    url: str
    status: int
    idempotency_key: str


class WebhookRelay:
    """Drains the double's outgoing webhooks in a thread and POSTs them to their receivers."""

    def __init__(self, double: GitLabDouble, routes: Mapping[str, Sequence[str]]) -> None:
        self.double = double
        #: hook URL -> receivers used in turn (a hook URL not listed is POSTed to as is)
        self.routes = {url: list(targets) for url, targets in routes.items()}
        #: every delivery goes to every receiver of its route at once (duplicates in parallel)
        self.fan_out = False
        #: times each delivery is sent (GitLab's "Resend" keeps the Idempotency-Key)
        self.copies = 1
        self.sent: list[Sent] = []
        self._paused: list[Delivery] = []
        #: hook URLs whose deliveries are kept back (None: all of them)
        self._pause: set[str | None] = set()
        self._lock = threading.Lock()
        self._turns: dict[str, itertools.count[int]] = {}
        self._stopping = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="relay-fan-out")
        self._thread = threading.Thread(target=self._run, name="webhook-relay", daemon=True)

    def start(self) -> None:
        """Starts delivering."""
        self._thread.start()

    def stop(self) -> None:
        """Stops after the delivery in progress."""
        self._stopping.set()
        self._thread.join(timeout=DELIVERY_TIMEOUT + 5)
        self._pool.shutdown(wait=False)

    def pause(self, hook_url: str | None = None) -> None:
        """Keeps deliveries for one hook URL (default: all) back; they arrive late, in order,
        on `resume`."""
        with self._lock:
            self._pause.add(hook_url)

    def resume(self) -> None:
        """Sends what was kept back, then goes on as usual."""
        with self._lock:
            self._pause.clear()

    def held_back(self) -> list[Delivery]:
        """Deliveries kept back by `pause`, oldest first."""
        with self._lock:
            return list(self._paused)

    def receivers(self, hook_url: str | None) -> list[str]:
        """Every receiver of a hook URL."""
        if not hook_url:
            return []
        return list(self.routes.get(hook_url, [hook_url]))

    def _run(self) -> None:
        while not self._stopping.is_set():
            fresh = self.double.take_outgoing(timeout=0.1)
            with self._lock:
                self._paused.extend(fresh)
                due = [d for d in self._paused if not self._held(d)]
                self._paused = [d for d in self._paused if self._held(d)]
            for delivery in due:
                self._deliver(delivery)

    def _held(self, delivery: Delivery) -> bool:
        return None in self._pause or delivery.url in self._pause

    def _deliver(self, delivery: Delivery) -> None:
        targets = self.receivers(delivery.url)
        if not targets or not self.double.deliverable(delivery):
            return  # GitLab sends nothing to a hook disabled since the event was queued
        if self.fan_out and len(targets) > 1:
            for _ in range(self.copies):
                list(self._pool.map(lambda url: self._post(delivery, url), targets))
            return
        turn = self._turns.setdefault(delivery.url or "", itertools.count())
        for _ in range(self.copies):
            self._post(delivery, targets[next(turn) % len(targets)])

    def _post(self, delivery: Delivery, url: str) -> None:
        try:
            status = requests.post(
                url,
                data=delivery.body,
                headers=delivery.resend_headers(),
                timeout=DELIVERY_TIMEOUT,
            ).status_code
        except requests.RequestException as exc:
            log.warning("webhook to %s not delivered: %s", url, type(exc).__name__)
            status = 0
        self.double.hook_answered(delivery, status)  # the hook's auto-disabling counts it
        key = delivery.headers.get("Idempotency-Key", "")
        with self._lock:
            self.sent.append(Sent(delivery.kind, url, status, key))
