"""The audit log is append-only: the database refuses to rewrite or remove its rows

A change's audit rows are its history: every transition fire() made, every stale or refused
event, who did it and when. Migration 0006 keeps raw writes off the state tables; this one keeps
them off the record of those writes, so nobody can move a change by hand and then erase or
reword the trace. Any UPDATE or DELETE of `audit_log` (and, on PostgreSQL, a TRUNCATE, which
fires no DELETE trigger) is refused unless its transaction opened the door fire() opens
(bot/store/writeguard.py: `state_writes()`), with the same SQLSTATE 23G01 and the same
"gitops: state write refused" start, so the bot reports it as a StateWriteRefused. INSERTs
pass: fire(), submit and the stale-event records append rows without the door.

The bot itself never updates or deletes audit rows; the door is there for a repair by hand
(README "States") and for the test suite's cleanup.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_TABLE = "audit_log"
_FUNCTION = "gitops_refuse_audit_write"
_REFUSED = "gitops: state write refused: %s on audit_log outside fire() (it is append-only)"

_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('gitops.fire', true) IS DISTINCT FROM 'on' THEN
    RAISE EXCEPTION '{_REFUSED % "%"}', TG_OP
      USING ERRCODE = '23G01',
            HINT = 'audit rows are only ever added (bot/store/writeguard.py)';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END
$$
"""

#: PostgreSQL: (trigger name suffix, the statement it guards).
_PG_TRIGGERS = (("update", "UPDATE"), ("delete", "DELETE"), ("truncate", "TRUNCATE"))
#: SQLite: the same, but for TRUNCATE, which SQLite does not have.
_SQLITE_TRIGGERS = (("update", "UPDATE"), ("delete", "DELETE"))


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(_PG_FUNCTION)
        for suffix, what in _PG_TRIGGERS:
            op.execute(
                f"CREATE TRIGGER gitops_{_TABLE}_{suffix} BEFORE {what} ON {_TABLE} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"
            )
    elif dialect == "sqlite":
        for suffix, what in _SQLITE_TRIGGERS:
            op.execute(
                f"CREATE TRIGGER gitops_{_TABLE}_{suffix} BEFORE {what} ON {_TABLE} "
                f"WHEN NOT gitops_fire_allowed() BEGIN "
                f"SELECT RAISE(ABORT, '{_REFUSED % what}'); END"
            )
    else:
        raise NotImplementedError(f"audit triggers for {dialect}")


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for suffix, _ in _PG_TRIGGERS if postgres else _SQLITE_TRIGGERS:
        on = f" ON {_TABLE}" if postgres else ""
        op.execute(f"DROP TRIGGER IF EXISTS gitops_{_TABLE}_{suffix}{on}")
    if postgres:
        op.execute(f"DROP FUNCTION IF EXISTS {_FUNCTION}()")
