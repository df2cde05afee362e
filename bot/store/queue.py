"""The merge queue: one line of changes per (project, target branch), kept in the database.

A change enters its branch's line when its operation moves into MERGING (approved, its MR
pipeline passed) and leaves it when the operation moves out (merged, failed, closed, cancelled):
fire_in() calls enter()/leave() in the transition's own transaction, so a crash or a Redis flush
never loses a place, and no place outlives its operation's MERGING. Order is the time of entry
(first approved, first merged); an operator's promotion gives a change the line's lowest rank
minus one.

Reading the line also drops rows whose operation no longer holds its binding in MERGING (a
newer request replaced it): they are skipped at once and deleted on the way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any

from sqlalchemy import delete, func, insert, literal, select, update
from sqlalchemy.engine import Connection, Engine

from bot.core.states import BindingState, Step
from bot.store.commands import queue_status_comment
from bot.store.models import BINDINGS, MERGE_QUEUE, OPERATIONS
from bot.store.queries import iso_utc

_q = MERGE_QUEUE

#: Steps whose change keeps its place but does not hold up the line: its pipeline outlived
#: the poll tiers (pending); the next change goes ahead meanwhile.
PAUSED_STEPS = frozenset({Step.HANDLE_PIPELINE_PENDING})
#: The audit log's event for an operator's promotion (a version-0 row: no transition).
PROMOTE_EVENT = "promote"


@dataclass(frozen=True, slots=True)
class InLine:
    """One change in a line, as the queue commands and the dashboard show it."""

    operation_id: str
    project: str
    target_branch: str
    #: 1-based place in the line
    position: int
    step: Step
    title: str
    mr_iid: int | None
    mr_url: str | None
    entered_at: datetime

    @property
    def paused(self) -> bool:
        """True when it waits on its own pipeline (pending) and lets the next go ahead."""
        return self.step in PAUSED_STEPS

    def as_json(self) -> dict[str, Any]:
        """The entry as the API and `gitops-bot queue --json` show it."""
        return {
            "position": self.position,
            "operation_id": self.operation_id,
            "title": self.title,
            "mr_iid": self.mr_iid,
            "mr_url": self.mr_url,
            "step": self.step.name,
            "step_code": self.step.value,
            "paused": self.paused,
            "entered_at": iso_utc(self.entered_at),
        }


def by_line(entries: Sequence[InLine]) -> list[list[InLine]]:
    """all_lines()' entries cut into their lines, each head first."""
    return [list(group) for _, group in groupby(entries, lambda e: (e.project, e.target_branch))]


def lines_json(entries: Sequence[InLine]) -> list[dict[str, Any]]:
    """Every line for scripts: project, branch, the change that merges next, the changes."""
    return [
        {
            "project": entries[0].project,
            "target_branch": entries[0].target_branch,
            "head": head_of(entries),
            "changes": [entry.as_json() for entry in entries],
        }
        for entries in by_line(entries)
    ]


@dataclass(frozen=True, slots=True)
class Place:
    """Where one change stands in its line."""

    project: str
    target_branch: str
    position: int
    size: int
    #: the change that merges next: the first one not paused (None if all are)
    head: str | None
    operation_id: str
    #: True when it waits on its own pipeline (pending) and lets the next go ahead
    paused: bool = False

    @property
    def is_head(self) -> bool:
        """True when this change is the one that rebases, waits for its pipeline and merges."""
        return self.head == self.operation_id

    def as_json(self) -> dict[str, Any]:
        """The place as the API shows it in a change's `queue`."""
        return {
            "target_branch": self.target_branch,
            "position": self.position,
            "size": self.size,
            "head": self.is_head,
            "paused": self.paused,
        }


def rank_at(now: datetime) -> int:
    """The rank of a change entering at `now`: microseconds since the epoch."""
    return int(now.timestamp() * 1_000_000)


def enter(conn: Connection, operation_id: str, now: datetime) -> None:
    """Puts the operation at the back of its branch's line (fire_in(), entering MERGING)."""
    conn.execute(delete(_q).where(_q.c.operation_id == operation_id))
    conn.execute(
        insert(_q).from_select(
            ["operation_id", "project", "target_branch", "rank", "entered_at"],
            select(
                OPERATIONS.c.id,
                OPERATIONS.c.project,
                OPERATIONS.c.target_branch,
                literal(rank_at(now)),
                literal(now, type_=_q.c.entered_at.type),
            ).where(OPERATIONS.c.id == operation_id),
        )
    )


def drop(engine: Engine, operation_id: str) -> None:
    """Takes the operation out of its line while it stays in MERGING (GitLab's merge train
    orders its project's merges instead)."""
    with engine.begin() as conn:
        leave(conn, operation_id)


def without_train(engine: Engine, operation_id: str, now: datetime) -> None:
    """The operation merges through the bot's queue after all (GitLab refused its merge train):
    recorded on it, and it joins the back of its line."""
    with engine.begin() as conn:
        conn.execute(
            update(OPERATIONS)
            .where(OPERATIONS.c.id == operation_id)
            .values(merge_train=False, merge_train_at=now)
        )
        enter(conn, operation_id, now)


def leave(conn: Connection, operation_id: str) -> None:
    """Takes the operation out of its line (fire_in(), leaving MERGING)."""
    conn.execute(delete(_q).where(_q.c.operation_id == operation_id))


_LINE = (
    select(
        _q.c.operation_id,
        _q.c.project,
        _q.c.target_branch,
        _q.c.entered_at,
        OPERATIONS.c.step,
        OPERATIONS.c.title,
        OPERATIONS.c.mr_iid,
        OPERATIONS.c.mr_url,
        BINDINGS.c.state,
        BINDINGS.c.operation_id.label("owner"),
    )
    .select_from(_q)
    .outerjoin(OPERATIONS, OPERATIONS.c.id == _q.c.operation_id)
    .outerjoin(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)
    .order_by(_q.c.project, _q.c.target_branch, _q.c.rank, _q.c.entered_at, _q.c.operation_id)
)


def _read(conn: Connection, project: str | None, branch: str | None) -> list[InLine]:
    query = _LINE
    if project is not None and branch is not None:
        query = query.where(_q.c.project == project, _q.c.target_branch == branch)
    lines: list[InLine] = []
    gone: list[str] = []
    position = 0
    key: tuple[str, str] | None = None
    for r in conn.execute(query):
        if r.owner != r.operation_id or r.state != BindingState.MERGING.value:
            gone.append(r.operation_id)
            continue
        if key != (r.project, r.target_branch):
            key, position = (r.project, r.target_branch), 0
        position += 1
        lines.append(
            InLine(
                operation_id=r.operation_id,
                project=r.project,
                target_branch=r.target_branch,
                position=position,
                step=Step(r.step),
                title=r.title,
                mr_iid=r.mr_iid,
                mr_url=r.mr_url,
                entered_at=r.entered_at,
            )
        )
    if gone:
        conn.execute(delete(_q).where(_q.c.operation_id.in_(gone)))
    return lines


def line(engine: Engine, project: str, branch: str) -> list[InLine]:
    """The changes in one branch's line, head first."""
    with engine.begin() as conn:
        return _read(conn, project, branch)


def all_lines(engine: Engine) -> list[InLine]:
    """Every line's changes, grouped by (project, branch), each line head first."""
    with engine.begin() as conn:
        return _read(conn, None, None)


def head_of(entries: Sequence[InLine]) -> str | None:
    """The change that merges next in one line: the first not paused."""
    return next((e.operation_id for e in entries if not e.paused), None)


def place(engine: Engine, operation_id: str) -> Place | None:
    """Where the operation stands in its line; None when it is in none (not MERGING)."""
    with engine.begin() as conn:
        key = conn.execute(
            select(_q.c.project, _q.c.target_branch).where(_q.c.operation_id == operation_id)
        ).one_or_none()
        if key is None:
            return None
        entries = _read(conn, key.project, key.target_branch)
    mine = next((e for e in entries if e.operation_id == operation_id), None)
    if mine is None:
        return None
    return Place(
        project=key.project,
        target_branch=key.target_branch,
        position=mine.position,
        size=len(entries),
        head=head_of(entries),
        operation_id=operation_id,
        paused=mine.paused,
    )


def take_turn(engine: Engine, project: str, branch: str, now: datetime) -> str | None:
    """The line's head, if it has not been driven as the head yet (it waits in line): marked
    as driven now, and queued for its status comment (it is first in line now). None when the
    head is already going, or the line is empty. One caller wins per head (compare-and-set)."""
    with engine.begin() as conn:
        head = head_of(_read(conn, project, branch))
        if head is None:
            return None
        taken = conn.execute(
            update(_q)
            .where(_q.c.operation_id == head, _q.c.head_since.is_(None))
            .values(head_since=now)
        )
        if taken.rowcount != 1:
            return None
        queue_status_comment(conn, head, forget=False)  # it says "first in line" now
    return head


def mark_turn(engine: Engine, operation_id: str, now: datetime, *, head: bool) -> None:
    """Records that the operation's step found it at the head (driven since `now` unless
    already) or waiting in line (not driven)."""
    query = update(_q).where(_q.c.operation_id == operation_id)
    if head:
        query = query.where(_q.c.head_since.is_(None)).values(head_since=now)
    else:
        query = query.where(_q.c.head_since.is_not(None)).values(head_since=None)
    with engine.begin() as conn:
        conn.execute(query)


def line_of(engine: Engine, operation_id: str) -> tuple[str, str] | None:
    """(project, target branch) of the operation, whether or not it is in a line now."""
    with engine.connect() as conn:
        row = conn.execute(
            select(OPERATIONS.c.project, OPERATIONS.c.target_branch).where(
                OPERATIONS.c.id == operation_id
            )
        ).one_or_none()
    return None if row is None else (row.project, row.target_branch)


def promote(engine: Engine, operation_id: str) -> Place | None:
    """Moves the operation to the front of its line; its new place, or None when it is in no
    line (it is not merging). Its status comment and that of the change driven as the head
    until now are queued for a re-render: where they stand has changed."""
    with engine.begin() as conn:
        key = conn.execute(
            select(_q.c.project, _q.c.target_branch).where(_q.c.operation_id == operation_id)
        ).one_or_none()
        if key is None:
            return None
        lowest = conn.execute(
            select(func.min(_q.c.rank)).where(
                _q.c.project == key.project, _q.c.target_branch == key.target_branch
            )
        ).scalar_one()
        driven = conn.execute(
            select(_q.c.operation_id).where(
                _q.c.project == key.project,
                _q.c.target_branch == key.target_branch,
                _q.c.head_since.is_not(None),
            )
        ).scalars()
        for moved in sorted({operation_id, *driven}):
            queue_status_comment(conn, moved)
        # nobody is the driven head until the promoted change takes its turn (take_turn)
        conn.execute(
            update(_q)
            .where(_q.c.project == key.project, _q.c.target_branch == key.target_branch)
            .values(head_since=None)
        )
        conn.execute(
            update(_q).where(_q.c.operation_id == operation_id).values(rank=int(lowest) - 1)
        )
    return place(engine, operation_id)
