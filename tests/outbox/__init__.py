"""The outbox dispatcher against the GitLab double (on `responses`) and a mocked approval system.

`harness(db)` installs services wired to the double (jobs/context.py) and yields a `Harness`;
`Harness.operation(...)` opens a real MR in the double and drives an operation through the table
onto it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import responses
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

from bot.approval import ApprovalClient
from bot.config import Settings
from bot.core.events import Event as E
from bot.core.labels import SCOPE
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.gitlab import Account, ApproveComponent, make_client
from bot.services import Clients, Services
from bot.store.fire import fire
from bot.store.models import OUTBOX, utcnow
from bot.store.submit import submit
from jobs import context
from sim.gitlab import GitLabDouble, Note
from tests.builders import PATHS, binding_state, make_request

URL = "https://gitlab.example.com"
APPROVAL_URL = "https://approval.example.com"
PUBLIC_URL = "https://gitops.example.com"
PROJECT = "platform/config"
BOT = "gitops-bot"
PERSON = "alice"

_branches = itertools.count(1)

#: How to reach each failure/closing state from a state on the happy path.
_DETOURS: dict[S, tuple[S, E]] = {
    S.CREATE_FAILED: (S.MR_CREATING, E.CREATE_ERROR),
    S.HANDLE_FAILED: (S.MERGING, E.MERGE_ERROR),
    S.REJECTED: (S.APPROVAL_SENT, E.REJECTED),
    S.CLOSED: (S.MERGING, E.CANCEL),
}


@dataclass
class NullQueue:
    """A work queue that records jobs (the dispatcher enqueues nothing)."""

    jobs: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)

    def enqueue(self, func: str, *args: object, job_id: str | None = None) -> None:
        self.jobs.append((func, args))

    def enqueue_in(
        self, seconds: float, func: str, *args: object, job_id: str | None = None
    ) -> None:
        self.jobs.append((func, args))

    def length(self) -> int:
        return len(self.jobs)


@dataclass
class Harness:
    """The database, the GitLab double and the `responses` mock one test dispatches against."""

    db: Engine
    double: GitLabDouble
    rsps: responses.RequestsMock

    def open_mr(self, *, by_bot: bool = True) -> int:
        """Opens an MR in the double as the bot or as a person; its iid."""
        mr = self.double.open_mr(
            PROJECT, f"change-{next(_branches)}", author=BOT if by_bot else PERSON
        )
        return mr.iid

    def mr_changes(self, iid: int, *, by_bot: bool = True) -> dict[str, Any]:
        """The operation fields MR_OPENED sets for MR `iid` of the project."""
        project = self.double.project(PROJECT)
        return {
            "mr_iid": iid,
            "project_id": project.id,
            "mr_url": f"{URL}/{PROJECT}/-/merge_requests/{iid}",
            "mr_opened_by_bot": by_bot,
        }

    def operation(
        self,
        state: S,
        flow: Flow = Flow.APPROVE_FIRST,
        *,
        by_bot: bool = True,
        iid: int | None = None,
        **request: Any,
    ) -> tuple[str, int]:
        """An operation on a real MR of the double, driven through the table into `state`."""
        iid = iid if iid is not None else self.open_mr(by_bot=by_bot)
        op_id = submit(self.db, make_request(flow=flow, project=PROJECT, **request)).operation_id
        detour = _DETOURS.get(state)
        goal = detour[0] if detour else state
        current = binding_state(self.db, op_id)
        for event, changes in PATHS[flow]:
            if current == goal:
                break
            if event is E.MR_OPENED:
                changes = self.mr_changes(iid, by_bot=by_bot)
            current = fire(self.db, TransitionRequest(op_id, event, changes=changes)).new_state
        assert current == goal, f"could not reach {goal} in {flow}"
        if detour:
            fire(self.db, TransitionRequest(op_id, detour[1]))
        return op_id, iid

    def checking(self, *, iid: int | None = None, **request: Any) -> tuple[str, int]:
        """An approve-first operation whose MR was just opened: MR_CREATING, two rows due."""
        iid = iid if iid is not None else self.open_mr()
        op_id, _ = self.operation(S.MR_CREATING, iid=iid, **request)
        fire(self.db, TransitionRequest(op_id, E.MR_OPENED, changes=self.mr_changes(iid)))
        return op_id, iid

    def notes(self, iid: int) -> list[Note]:
        """The MR's comments (system notes left out)."""
        return [n for n in self.double.mr(PROJECT, iid).notes.values() if not n.system]

    def gitops_labels(self, iid: int) -> list[str]:
        """The MR's gitops:: labels."""
        return [label for label in self.double.mr(PROJECT, iid).labels if label.startswith(SCOPE)]

    def label_calls(self, iid: int) -> int:
        """PUTs to the MR itself (labels, close)."""
        return self.double.count("PUT", path_endswith=f"/merge_requests/{iid}")

    def rows(self, operation_id: str | None = None) -> list[dict[str, Any]]:
        """Outbox rows (of one operation), oldest first."""
        query = select(OUTBOX).order_by(OUTBOX.c.id)
        if operation_id is not None:
            query = query.where(OUTBOX.c.operation_id == operation_id)
        with self.db.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def unsent(self, operation_id: str | None = None) -> list[dict[str, Any]]:
        """Outbox rows not yet sent."""
        return [r for r in self.rows(operation_id) if r["sent_at"] is None]

    def withdraw_calls(self, approval_id: str) -> int:
        """Calls the approval system got to withdraw `approval_id`."""
        wanted = f"{APPROVAL_URL}/approvals/{approval_id}/withdraw"
        return sum(1 for call in self.rsps.calls if call.request.url == wanted)


@contextmanager
def harness(db: Engine, **overrides: Any) -> Iterator[Harness]:
    """Jobs wired to the GitLab double (author bot, a person) and the approval system's mock;
    `overrides` are Settings fields (outbox_max_attempts=3)."""
    double = GitLabDouble(URL)
    double.add_project(PROJECT, files={"config/prod.yaml": "replicas: 1\n"})
    double.add_user(BOT, token="author-token", access={PROJECT: 40})
    double.add_user(PERSON, token="alice-token", access={PROJECT: 30})
    settings = Settings(
        gitlab_url=URL, approval_url=APPROVAL_URL, public_url=PUBLIC_URL, **overrides
    )
    approval = ApprovalClient(APPROVAL_URL)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        double.mount(rsps, base_url=URL)
        clients = Clients(
            author=Account(make_client(URL, "author-token", timeout=5.0), "author"),
            approvers=[],
            approve=ApproveComponent(),
            approval=approval,
        )
        services = Services(settings=settings, engine=db, queue=NullQueue(), clients=clients)
        try:
            with context.installed(services):
                yield Harness(db, double, rsps)
        finally:
            approval.close()


def add_row(h: Harness, operation_id: str, effect: str) -> None:
    """Writes an outbox row directly, as a transition would have (due now), with any kind."""
    now = utcnow()
    with h.db.begin() as conn:
        conn.execute(
            insert(OUTBOX).values(
                operation_id=operation_id,
                effect=effect,
                attempts=0,
                next_attempt_at=now,
                created_at=now,
            )
        )


T = TypeVar("T")


def together(work: Callable[[], T], threads: int = 2) -> list[T]:
    """Runs `work` in `threads` threads released at the same moment; their results."""
    barrier = threading.Barrier(threads)

    def run() -> T:
        barrier.wait()
        return work()

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(run) for _ in range(threads)]
        return [f.result() for f in futures]
