"""fire()'s write on PostgreSQL: binding CAS, operation CAS, audit and outbox in one statement.

Data-modifying CTEs (PostgreSQL docs, "WITH Queries", 7.8.4) let the whole write take one round
trip instead of four; every part after the binding CAS reads from the part before it, so a lost
race writes nothing at all. It opens the database's state door (bot/store/writeguard.py) in the
same statement. fire.write_path() picks this on PostgreSQL and says why the generic write exists
too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON
from sqlalchemy.engine import Connection

from bot.core.callbacks import delivery_id
from bot.core.table import Effect
from bot.store.models import Operation
from bot.store.writeguard import OPEN_POSTGRES


@dataclass(frozen=True, slots=True)
class Write:
    """Everything one transition writes."""

    operation_id: str
    binding_id: int
    binding_version: int
    version: int
    from_state: str | None
    to_state: str
    event: str
    step: int
    changes: dict[str, Any]
    effects: list[str]
    source: str
    actor: str | None
    correlation_id: str | None
    detail: str | None
    now: datetime

    @property
    def phase_changed(self) -> bool:
        """Whether this write moves the binding to another state (the API's `phase`)."""
        return self.to_state != self.from_state

    def callback_payload(self) -> dict[str, Any]:
        """What a callback row keeps of this phase change (bot/app/callbacks.py sends it)."""
        return {
            "phase": self.to_state,
            "previous_phase": self.from_state,
            "step": self.step,
            "at": self.now.isoformat(),
        }


_OP_COLUMNS = {c.name: c for c in Operation.__table__.columns}


def write_postgres(conn: Connection, w: Write) -> int | None:
    """Runs the CAS-audit-outbox write as one statement; the new version, or None if raced."""
    params: dict[str, Any] = {
        "op": w.operation_id,
        "bid": w.binding_id,
        "bv": w.binding_version,
        "v": w.version,
        "from_state": w.from_state,
        "to_state": w.to_state,
        "event": w.event,
        "step": w.step,
        "source": w.source,
        "actor": w.actor,
        "cid": w.correlation_id,
        "detail": w.detail,
        "now": w.now,
    }
    sets = ["step = :step", "version = version + 1", "updated_at = :now"]
    for i, (name, value) in enumerate(sorted(w.changes.items())):
        column = _OP_COLUMNS[name]  # names were checked against fire.WRITABLE
        if isinstance(column.type, JSON):
            value = json.dumps(value)
            sets.append(f"{name} = CAST(:c{i} AS JSON)")
        else:
            sets.append(f"{name} = :c{i}")
        params[f"c{i}"] = value
    outbox = ""
    if w.effects:
        values = ", ".join(f"(:e{i})" for i in range(len(w.effects)))
        params.update({f"e{i}": effect for i, effect in enumerate(w.effects)})
        outbox = f""",
x AS (
  INSERT INTO outbox (operation_id, effect, attempts, next_attempt_at, created_at)
  SELECT :op, e.effect, 0, :now, :now FROM o, (VALUES {values}) AS e(effect)
)"""
    if w.phase_changed:
        # the operation's callback_url asks for it; one row per phase (the unique dedupe_key)
        params.update(
            cbk=delivery_id(w.operation_id, w.to_state), cbp=json.dumps(w.callback_payload())
        )
        outbox += f""",
cb AS (
  INSERT INTO outbox (operation_id, effect, payload, attempts, next_attempt_at, created_at,
                      dedupe_key)
  SELECT :op, '{Effect.CALLBACK.value}', CAST(:cbp AS JSON), 0, :now, :now, :cbk
  FROM o, operations p WHERE p.id = :op AND p.callback_url IS NOT NULL
  ON CONFLICT DO NOTHING
)"""
    # the stay in a state starts when a transition changes it, not at a move within it
    since = ", state_since = :now" if w.to_state != w.from_state else ""
    # the door (writeguard.OPEN_POSTGRES) opens in this statement, before the triggers read it:
    # the binding CAS cannot update its row before the EXISTS over `door` has run, and every
    # write after it reads from it (a round trip saved over a separate set_config)
    sql = f"""
WITH door AS ({OPEN_POSTGRES}),
b AS (
  UPDATE bindings SET state = :to_state, version = version + 1, updated_at = :now{since}
  WHERE id = :bid AND version = :bv AND operation_id = :op AND EXISTS (SELECT 1 FROM door)
  RETURNING id
),
o AS (
  UPDATE operations SET {", ".join(sets)}
  WHERE id = :op AND version = :v AND EXISTS (SELECT 1 FROM b)
  RETURNING version
),
a AS (
  INSERT INTO audit_log (operation_id, from_state, to_state, event, step, version, source,
                         actor, correlation_id, detail, created_at)
  SELECT :op, :from_state, :to_state, :event, :step, o.version, :source, :actor, :cid,
         :detail, :now
  FROM o
){outbox}
SELECT version FROM o
"""
    # exec_driver_sql skips SQLAlchemy's statement compilation: this is the hot path, and the
    # SQL is built here from fixed fragments and checked column names only.
    version = conn.exec_driver_sql(_pyformat(sql), params).scalar_one_or_none()
    return int(version) if version is not None else None


@lru_cache(maxsize=256)
def _pyformat(sql: str) -> str:
    """`:name` placeholders turned into the driver's `%(name)s` (psycopg's paramstyle)."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)
