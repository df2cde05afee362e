"""A fake approval system speaking docs/approval-protocol.md over real HTTP.

It takes submissions (idempotent on `Idempotency-Key`), answers status reads and withdrawals,
and, when `decide_after` is set, decides each new approval that many seconds later and calls the
bot back, signed like the real one. Tests steer it: hold submissions (the caller blocks inside
its call, so a test can kill it there), decide by hand, replay or duplicate a callback.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import requests

from bot.approval.callback import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from sim.http import Server, Timers, json_response, read_body, remote_port

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)

#: Longest a held submission waits for its release (the caller's own timeout is 10 s).
MAX_HOLD_SECONDS = 30.0
#: Attempts per callback delivery before it is given up (at-least-once, re-signed each time).
CALLBACK_ATTEMPTS = 5


@dataclass
class Approval:
    """One approval request as the approval system keeps it."""

    approval_id: str
    operation_id: str
    submission: dict[str, Any]
    decision: str = "pending"
    #: how many submit calls named it (1 plus the bot's re-sends with the same key)
    submits: int = 1


@dataclass
class HeldSubmit:
    """A submit call being held open: the approval exists, its answer waits for `released`."""

    operation_id: str
    remote_port: int | None
    released: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class SentCallback:
    """One callback delivery attempt and the bot's answer (0: no answer)."""

    operation_id: str
    request_id: str
    decision: str
    url: str
    status: int


class FakeApprovalSystem:
    """The approval system's side of the protocol, as a local HTTP server."""

    def __init__(
        self,
        secret: str,
        *,
        decide_after: float | None = 0.3,
        decision: str = "approved",
        targets: Sequence[str] = (),
    ) -> None:
        self.secret = secret
        #: seconds after a new submission that it is decided (None: only by hand)
        self.decide_after = decide_after
        self.decision = decision
        #: callback URLs used in turn (default: the callback_url of each submission)
        self.targets = list(targets)
        self.approvals: dict[str, Approval] = {}
        self.withdrawn: list[str] = []
        self.sent: list[SentCallback] = []
        self.held: list[HeldSubmit] = []
        self._holding = False
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._requests = itertools.count(1)
        self._turn = itertools.count()
        self._timers = Timers("fake-approval")
        self._server = Server(self._app)
        self.url = self._server.url

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> str:
        """Starts serving; the base URL (GITOPS_APPROVAL_URL)."""
        return self._server.start()

    def stop(self) -> None:
        """Releases held calls, stops deciding and serving."""
        self.release()
        self._timers.stop()
        self._server.stop()

    # -- steering ----------------------------------------------------------------------------

    def hold_submits(self, on: bool = True) -> None:
        """While on, each new submit is recorded and then held open (until `release`)."""
        with self._lock:
            self._holding = on

    def held_now(self) -> list[HeldSubmit]:
        """Submissions being held open right now."""
        with self._lock:
            return [h for h in self.held if not h.released.is_set()]

    def release(self) -> None:
        """Lets every held submit answer (its caller may be gone)."""
        with self._lock:
            self._holding = False
            for held in self.held:
                held.released.set()

    def approval_of(self, operation_id: str) -> Approval | None:
        """The approval submitted for an operation."""
        with self._lock:
            return next(
                (a for a in self.approvals.values() if a.operation_id == operation_id), None
            )

    def decide(
        self,
        operation_id: str,
        decision: str = "approved",
        *,
        request_id: str | None = None,
        url: str | None = None,
        retry: bool = True,
    ) -> int:
        """Decides the operation's approval and calls back now; the bot's answer (0: none)."""
        approval = self.approval_of(operation_id)
        if approval is None:
            raise KeyError(f"no approval was submitted for {operation_id}")
        with self._lock:
            approval.decision = decision
        rid = request_id or f"cb-{approval.approval_id}-{next(self._requests)}"
        return self._send(approval, decision, rid, url, attempt=1 if retry else CALLBACK_ATTEMPTS)

    def callback_body(self, operation_id: str, decision: str, request_id: str) -> bytes:
        """The callback body for an operation's approval (ext as it was submitted)."""
        approval = self.approval_of(operation_id)
        if approval is None:
            raise KeyError(f"no approval was submitted for {operation_id}")
        return self._body(approval, decision, request_id)

    def signed_headers(self, body: bytes) -> dict[str, str]:
        """Fresh timestamp and signature headers for a callback body."""
        stamp = str(int(time.time()))
        return {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: stamp,
            SIGNATURE_HEADER: sign(self.secret, stamp, body),
        }

    def submits(self, operation_id: str) -> int:
        """How many submit calls named the operation."""
        approval = self.approval_of(operation_id)
        return 0 if approval is None else approval.submits

    # -- HTTP --------------------------------------------------------------------------------

    def _app(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        parts = [p for p in environ.get("PATH_INFO", "").split("/") if p]
        if method == "POST" and parts == ["approvals"]:
            status, answer = self._submit(environ)
        elif method == "GET" and len(parts) == 2 and parts[0] == "approvals":
            status, answer = self._status(parts[1])
        elif method == "POST" and len(parts) == 3 and parts[::2] == ["approvals", "withdraw"]:
            status, answer = self._withdraw(parts[1])
        else:
            status, answer = 404, {"message": "not found"}
        return json_response(start_response, status, json.dumps(answer).encode())

    def _submit(self, environ: WSGIEnvironment) -> tuple[int, dict[str, Any]]:
        body = json.loads(read_body(environ) or b"{}")
        operation_id = str(body.get("operation_id", ""))
        key = environ.get("HTTP_IDEMPOTENCY_KEY") or operation_id
        held: HeldSubmit | None = None
        with self._lock:
            approval = self.approvals.get(key)
            if approval is not None:
                approval.submits += 1  # a re-send with the same key: the first answer again
            else:
                approval = Approval(f"apr-{next(self._ids)}", operation_id, body)
                self.approvals[key] = approval
                if self.decide_after is not None:
                    self._timers.call_in(self.decide_after, lambda: self._auto(key))
            if self._holding:
                held = HeldSubmit(operation_id, remote_port(environ))
                self.held.append(held)
        if held is not None:
            held.released.wait(MAX_HOLD_SECONDS)
        return 201, {"approval_id": approval.approval_id}

    def _status(self, approval_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            found = next((a for a in self.approvals.values() if a.approval_id == approval_id), None)
        if found is None:
            return 404, {"message": "unknown approval"}
        return 200, {"approval_id": approval_id, "decision": found.decision}

    def _withdraw(self, approval_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            found = next((a for a in self.approvals.values() if a.approval_id == approval_id), None)
            if found is None:
                return 404, {"message": "unknown approval"}
            self.withdrawn.append(approval_id)
            if found.decision == "pending":
                found.decision = "withdrawn"
                return 200, {"approval_id": approval_id, "decision": "withdrawn"}
        return 409, {"message": f"already {found.decision}"}

    # -- callbacks ---------------------------------------------------------------------------

    def _auto(self, key: str) -> None:
        with self._lock:
            approval = self.approvals[key]
            if approval.decision != "pending":
                return
            approval.decision = self.decision
        rid = f"cb-{approval.approval_id}-{next(self._requests)}"
        self._send(approval, self.decision, rid, None, attempt=1)

    def _body(self, approval: Approval, decision: str, request_id: str) -> bytes:
        return json.dumps(
            {
                "request_id": request_id,
                "operation_id": approval.operation_id,
                "approval_id": approval.approval_id,
                "decision": decision,
                "ext": approval.submission.get("ext") or {},
            }
        ).encode()

    def _target(self, approval: Approval) -> str:
        with self._lock:
            if self.targets:
                return self.targets[next(self._turn) % len(self.targets)]
        return str(approval.submission.get("callback_url", ""))

    def _send(
        self, approval: Approval, decision: str, request_id: str, url: str | None, attempt: int
    ) -> int:
        """Delivers one callback (re-signed); failures are retried later, at least once more."""
        target = url or self._target(approval)
        body = self._body(approval, decision, request_id)
        try:
            answer = requests.post(target, data=body, headers=self.signed_headers(body), timeout=10)
            status = answer.status_code
        except requests.RequestException:
            status = 0
        with self._lock:
            self.sent.append(
                SentCallback(approval.operation_id, request_id, decision, target, status)
            )
        if (status == 0 or status >= 500) and attempt < CALLBACK_ATTEMPTS:
            self._timers.call_in(
                0.5 * 2**attempt,
                lambda: self._send(approval, decision, request_id, None, attempt + 1),
            )
        return status
