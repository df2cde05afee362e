"""What every MR command shares: the MR and note it names, its result, and "once per note".

Every command runs one transaction (`once`) that first looks for an audit row of the same note
(correlation id `note:<id>`) and does nothing when there is one, so a delivery processed twice
runs its command once. A command that moves an operation (apply, retry, cancel, revert) is
audited by its transition row (source `command`, the commenter as actor, the note as
correlation id); every other decided command (status, help, refusals) writes a version-0 row
(`audit_row`) under the MR's operation id, or `mr:<project_id>!<iid>` when the MR has none.
Version-0 rows keep `count(version > 0) == operation.version`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.core.commands import Verb
from bot.core.events import Source
from bot.core.states import BindingState
from bot.store import commands as store
from bot.store.audit import insert_unmoved, record_unmoved
from bot.store.commands import MrOperation
from bot.store.engine import Engine
from bot.store.fire import TransitionMade
from bot.store.tx import Tx

#: Transactions tried when another writer wins the compare-and-set race.
ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class MrRef:
    """The merge request a command was typed on."""

    project_id: int
    project_path: str
    iid: int

    @property
    def key(self) -> str:
        """The audit key of a command on an MR that carries no operation."""
        return f"mr:{self.project_id}!{self.iid}"

    @property
    def subject_id(self) -> str:
        """The subject of a `/gitops apply` request: the MR itself."""
        return f"{self.project_path}!{self.iid}"

    def target_key(self, target_branch: str) -> str:
        """The target of a `/gitops apply` request: the project's branch it merges into."""
        return f"{self.project_path}:{target_branch}"


@dataclass(frozen=True, slots=True)
class Invocation:
    """One command typed by one person in one note."""

    verb: Verb
    actor: str
    note_id: int
    #: the command line, for the audit row's detail
    line: str = ""

    @property
    def correlation_id(self) -> str:
        """The audit correlation id that makes the note's command run once."""
        return note_correlation(self.note_id)


def note_correlation(note_id: int) -> str:
    """The correlation id of the audit rows a note's command wrote."""
    return f"note:{int(note_id)}"


@dataclass(frozen=True, slots=True)
class CommandVerdict:
    """What a command did: accepted (and the transition it made), or refused and why."""

    accepted: bool
    reason: str | None = None
    operation_id: str | None = None
    moved: TransitionMade | None = None
    #: the note was handled before: nothing ran now (accepted/reason are the earlier decision)
    duplicate: bool = False


# -- reading -------------------------------------------------------------------------------------


def mr_operations(conn: Tx, mr: MrRef) -> list[MrOperation]:
    """Every operation this MR carried, the one owning its binding first, then newest first."""
    return store.mr_operations(conn, mr.project_id, mr.project_path, mr.iid)


def mr_operation(engine: Engine, mr: MrRef) -> MrOperation | None:
    """The operation the MR carries now (the owner), else the latest one it carried."""
    found = store.mr_operations_of(engine, mr.project_id, mr.project_path, mr.iid)
    return found[0] if found else None


def audit_key(engine: Engine, mr: MrRef) -> str:
    """Where a command on this MR is audited: its operation's id, else `mr:<pid>!<iid>`."""
    op = mr_operation(engine, mr)
    return op.id if op is not None else mr.key


def previous(engine: Engine, mr: MrRef, note_id: int) -> CommandVerdict | None:
    """The decision recorded for this note's command, or None when it never ran."""
    return store.in_connection(engine, lambda conn: _previous(conn, mr, note_id))


def _previous(conn: Tx, mr: MrRef, note_id: int) -> CommandVerdict | None:
    keys = [mr.key, *(op.id for op in mr_operations(conn, mr))]
    row = store.first_note_row(conn, keys, note_correlation(note_id))
    if row is None:
        return None
    detail = str(row.detail or "")
    refused = row.version == 0 and detail.startswith(REFUSED)
    op_id = None if row.operation_id.startswith("mr:") else row.operation_id
    return CommandVerdict(
        accepted=not refused,
        reason=detail.removeprefix(REFUSED) if refused else None,
        operation_id=op_id,
        duplicate=True,
    )


# -- writing -------------------------------------------------------------------------------------

ACCEPTED = "accepted: "
NO_REQUEST = "there is no GitOps request on this merge request; comment /gitops apply to start one"
REFUSED = "refused: "
IGNORED = "ignored: "


def audit_row(
    conn: Tx,
    key: str,
    verb: str,
    actor: str,
    correlation_id: str,
    detail: str,
    state: BindingState | None = None,
) -> None:
    """One version-0 audit row for a command that moved nothing (who, what, decided how)."""
    insert_unmoved(
        conn,
        operation_id=key,
        event=f"cmd:{verb}",
        source=Source.COMMAND.value,
        detail=detail,
        state=state.value if state else None,
        actor=actor,
        correlation_id=correlation_id,
    )


def record_ignored(engine: Engine, key: str, verb: str, actor: str, note_id: int, why: str) -> None:
    """Audits a command that never runs (an edit, a system note, the bot's own, from a fork)."""
    record_unmoved(
        engine,
        operation_id=key,
        event=f"cmd:{verb}",
        source=Source.COMMAND.value,
        detail=IGNORED + why,
        actor=actor,
        correlation_id=f"{note_correlation(note_id)}:ignored",
    )


Body = Callable[[Tx], CommandVerdict]


def once(engine: Engine, mr: MrRef, inv: Invocation, body: Body) -> CommandVerdict:
    """Runs `body` in a transaction unless the note's command ran already; retries lost races."""

    def run(conn: Tx) -> CommandVerdict:
        earlier = _previous(conn, mr, inv.note_id)
        if earlier is not None:
            return earlier
        return body(conn)

    return store.in_note_transaction(engine, inv.correlation_id, run, ATTEMPTS)


def refuse_in(conn: Tx, key: str, inv: Invocation, reason: str) -> CommandVerdict:
    """Audits a refused command under `key` (inside the note's transaction) and says why."""
    audit_row(conn, key, inv.verb.value, inv.actor, inv.correlation_id, REFUSED + reason)
    return CommandVerdict(False, reason, None if key.startswith("mr:") else key)


def words(state: BindingState) -> str:
    """A state as a reason reads it (`HANDLE_FAILED` -> "handle failed")."""
    return state.value.lower().replace("_", " ")
