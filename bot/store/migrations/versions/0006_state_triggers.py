"""State writes refused by the database: triggers on operations and bindings

Any INSERT or DELETE on either table, and any UPDATE that changes one of their state columns,
is refused unless its transaction opened the door (bot/store/writeguard.py: `state_writes()`,
which fire() and submit use):

- PostgreSQL: one plpgsql function reads the transaction-local setting `gitops.fire`
  (`set_config('gitops.fire', 'on', true)`) and raises SQLSTATE 23G01 when it is not `on`;
  TRUNCATE is refused as well (it fires no DELETE trigger).
- SQLite: the triggers call `gitops_fire_allowed()`, a function the bot registers on each of
  its connections; a connection without it (the sqlite3 shell, another program) cannot even
  prepare such a write ("no such function"), which refuses it too. Writes to other columns
  need no function.

A later migration that rewrites these tables on SQLite (batch_alter_table copies and drops the
table) drops their triggers with them: it must create them again. One that writes state rows
must open the door itself.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: The state columns of each table: what fire() changes, the guards read, or says who owns it.
STATE_COLUMNS = {
    "bindings": ("state", "version", "operation_id"),
    "operations": ("step", "version", "mr_iid", "mr_opened_by_bot", "approved_at", "approval_id"),
}
_PREFIX = "gitops: state write refused"
_FUNCTION = "gitops_refuse_state_write"

_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('gitops.fire', true) IS DISTINCT FROM 'on' THEN
    RAISE EXCEPTION '{_PREFIX}: % on % outside fire()',
      CASE TG_OP WHEN 'UPDATE' THEN 'UPDATE of a state column' ELSE TG_OP END, TG_TABLE_NAME
      USING ERRCODE = '23G01',
            HINT = 'state rows change only through fire() (bot/store/writeguard.py)';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END
$$
"""


def _changed(columns: tuple[str, ...], differ: str) -> str:
    """True when the row update changes any of `columns` (NULL-safe)."""
    return " OR ".join(f"OLD.{c} {differ} NEW.{c}" for c in columns)


def _postgres() -> list[str]:
    statements = [_PG_FUNCTION]
    run = f"EXECUTE FUNCTION {_FUNCTION}()"
    for table, columns in STATE_COLUMNS.items():
        statements += [
            f"CREATE TRIGGER gitops_{table}_insert BEFORE INSERT ON {table} "
            f"FOR EACH STATEMENT {run}",
            f"CREATE TRIGGER gitops_{table}_delete BEFORE DELETE ON {table} "
            f"FOR EACH STATEMENT {run}",
            f"CREATE TRIGGER gitops_{table}_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT {run}",
            f"CREATE TRIGGER gitops_{table}_update BEFORE UPDATE OF {', '.join(columns)} "
            f"ON {table} FOR EACH ROW WHEN ({_changed(columns, 'IS DISTINCT FROM')}) {run}",
        ]
    return statements


def _sqlite() -> list[str]:
    statements = []
    for table, columns in STATE_COLUMNS.items():
        for what in ("INSERT", "DELETE"):
            statements.append(
                f"CREATE TRIGGER gitops_{table}_{what.lower()} BEFORE {what} ON {table} "
                f"WHEN NOT gitops_fire_allowed() BEGIN "
                f"SELECT RAISE(ABORT, '{_PREFIX}: {what} on {table} outside fire()'); END"
            )
        statements.append(
            f"CREATE TRIGGER gitops_{table}_update BEFORE UPDATE OF {', '.join(columns)} "
            f"ON {table} WHEN ({_changed(columns, 'IS NOT')}) AND NOT gitops_fire_allowed() "
            f"BEGIN SELECT RAISE(ABORT, '{_PREFIX}: UPDATE of a state column "
            f"({', '.join(columns)}) on {table} outside fire()'); END"
        )
    return statements


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        statements = _postgres()
    elif dialect == "sqlite":
        statements = _sqlite()
    else:
        raise NotImplementedError(f"state triggers for {dialect}")
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in STATE_COLUMNS:
        for what in ("insert", "delete", "update") + (("truncate",) if postgres else ()):
            on = f" ON {table}" if postgres else ""
            op.execute(f"DROP TRIGGER IF EXISTS gitops_{table}_{what}{on}")
    if postgres:
        op.execute(f"DROP FUNCTION IF EXISTS {_FUNCTION}()")
