"""Bulk seeding for benchmarks: many operations in one state, written directly (not for tests)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from bot.core.states import BindingState, Flow, Step
from bot.store.models import BINDINGS, OPERATIONS
from bot.store.writeguard import state_writes


def seed(
    engine: Engine,
    count: int,
    state: BindingState,
    step: Step,
    now: datetime,
    *,
    deadline_in: float | None = None,
    merged_ago: float | None = None,
    prefix: str = "bench",
    batch: int = 5000,
    flow: Flow = Flow.MR_FIRST,
) -> list[str]:
    """Inserts `count` operations owning their bindings in `state`/`step`; their ids.

    Benchmarks only: this bypasses fire() (under the write guard's explicit permission) so that
    100,000 rows take seconds, not minutes.
    """
    ids: list[str] = []
    for start in range(0, count, batch):
        n = min(batch, count - start)
        chunk = [str(uuid.uuid4()) for _ in range(n)]
        bindings: list[dict[str, Any]] = [
            {
                "subject_id": f"{prefix}-{start + i}-{op[:8]}",
                "target_key": "t",
                "operation_id": op,
                "state": state.value,
                "version": 1,
                "updated_at": now,
            }
            for i, op in enumerate(chunk)
        ]
        with engine.begin() as conn, state_writes(conn):
            binding_ids = [
                row.id
                for row in conn.execute(
                    insert(BINDINGS).returning(BINDINGS.c.id, sort_by_parameter_order=True),
                    bindings,
                )
            ]
            conn.execute(
                insert(OPERATIONS),
                [
                    {
                        "id": op,
                        "binding_id": bid,
                        "subject_id": b["subject_id"],
                        "target_key": "t",
                        "flow": flow.value,
                        "step": step.value,
                        "version": 1,
                        "kind": "change",
                        "project": "platform/config",
                        "project_id": 1,
                        "target_branch": "main",
                        "title": "bench",
                        "description": "",
                        "files": [],
                        "requested_by": "bench",
                        "mr_iid": start + i + 1,
                        "mr_opened_by_bot": True,
                        "merge_commit_sha": f"{start + i:040x}" if merged_ago is not None else None,
                        "merged_at": now - timedelta(seconds=merged_ago)
                        if merged_ago is not None
                        else None,
                        "deadline_at": now + timedelta(seconds=deadline_in)
                        if deadline_in is not None
                        else None,
                        "attempts": 0,
                        "created_at": now,
                        "updated_at": now,
                    }
                    for i, (op, bid, b) in enumerate(zip(chunk, binding_ids, bindings, strict=True))
                ],
            )
        ids.extend(chunk)
    return ids
