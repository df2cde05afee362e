"""The command role-by-verb matrix on the Procfile's processes: no unauthorized action.

The in-process matrix (tests/commands/test_matrix.py) again, end to end: the author, a
maintainer, a developer, a reporter, a guest, a non-member and the bot each type every verb on an
MR of their own, in a state the verb can act on. All 42 MRs live in one world: they are prepared
together, the 42 commands are typed at once, and every pair is judged afterwards, so that a
failure names each pair that misbehaved. The allowed pairs act (👀); the others change nothing
and are refused once (🚫, one reply, a refusal in the audit log); the bot's own note is ignored
without a reaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.flags import set_flag

# tests.commands also adds `GET .../merge_requests/:iid/diffs` to the double's router (on import):
# the revert of a `/gitops apply` change reads it, and this process serves the double.
from tests.commands import AUTHOR, BOT, PEOPLE
from tests.commands.test_matrix import ALLOWED, ROLES
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.world import PROJECT, World

pytestmark = pytest.mark.e2e

#: The state each verb's MR is brought to before the command (as in the in-process matrix).
SETUP = {
    "apply": "fresh",  # an open MR no request carries
    "status": "checking",  # an MR-first request waiting for its check pipeline
    "retry": "failed",  # stopped because its check pipeline failed
    "cancel": "checking",
    "revert": "validated",  # carried all the way to VALIDATED
    "help": "fresh",
}
#: The bot's answers (and the scenario's preparation) must come within this many seconds.
DEADLINE = 60.0
#: CI is left to the test; a waiting request polls its pipeline for longer than the test runs.
WORLD_ENV = {"GITOPS_PIPELINE_TIMEOUT": "900"}
PIPELINE_TIERS = [[1, 20], [3, 300]]


class Seen(NamedTuple):
    """Everything a command on a pair's MR could change."""

    #: (id, binding state, version) of each request the MR carries
    ops: tuple[tuple[str, S, int], ...]
    #: status-comment writes queued for them
    status_writes: int
    #: revert requests of the MR's request
    reverts: int


@dataclass
class Pair:
    """One role typing one verb, on an MR of its own."""

    verb: str
    role: str
    iid: int
    #: the request the MR carries before the command (None: a fresh MR)
    op_id: str | None = None
    #: what could change, seen before the command
    before: Seen = field(default_factory=lambda: Seen((), 0, 0))
    #: the note holding the command, once typed
    note_id: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"/gitops {self.verb} by {self.role} (!{self.iid})"

    @property
    def allowed(self) -> bool:
        return self.role in ALLOWED[self.verb]


def snapshot(world: World, pair: Pair) -> Seen:
    """What a command on the pair's MR could change, now."""
    ops = world.mr_operations(pair.iid)
    return Seen(
        tuple((op["id"], S(op["state"]), op["version"]) for op in ops),
        sum(world.status_writes(op["id"]) for op in ops),
        len(world.reverts_of(pair.op_id)) if pair.op_id else 0,
    )


# -- what "it acted" means per verb (as in tests/commands/test_matrix.py) ------------------------


def applied(world: World, pair: Pair) -> bool:
    """One MR-first request now carries the MR, submitted by this note, in its first step."""
    ops = world.mr_operations(pair.iid)
    submitted = [
        r for r in world.note_audit(pair.note_id) if r["event"] == "submit" and r["version"] > 0
    ]
    return (
        len(ops) == 1
        and Flow(ops[0]["flow"]) is Flow.MR_FIRST
        and S(ops[0]["state"]) is S.MR_CREATING
        and [r["operation_id"] for r in submitted] == [ops[0]["id"]]
    )


def refreshed(world: World, pair: Pair) -> bool:
    """A new status-comment outbox row was written for the MR's request."""
    assert pair.op_id is not None
    return world.status_writes(pair.op_id) == pair.before.status_writes + 1


def retried(world: World, pair: Pair) -> bool:
    """The failed request went back to creating (its MR re-checked), moved by this note.

    Judged by the note's transition rather than by the state now: with the pipeline still
    failed, the re-check may already have stopped the request again."""
    moves = [
        (r["operation_id"], r["from_state"], r["to_state"])
        for r in world.note_audit(pair.note_id)
        if r["version"] > 0
    ]
    return moves == [(pair.op_id, S.CREATE_FAILED.value, S.MR_CREATING.value)]


def cancelled(world: World, pair: Pair) -> bool:
    """The request is closed."""
    assert pair.op_id is not None
    return world.state(pair.op_id) is S.CLOSED


def reverted(world: World, pair: Pair) -> bool:
    """A revert request of the change now owns its subject and target."""
    assert pair.op_id is not None
    reverts = world.reverts_of(pair.op_id)
    return len(reverts) == 1 and bool(reverts[0]["owner"])


def helped(world: World, pair: Pair) -> bool:
    """The bot replied with the help."""
    return any("GitOps commands." in body for body in world.replies_to(pair.iid, pair.note_id))


ACTED: dict[str, Callable[[World, Pair], bool]] = {
    "apply": applied,
    "status": refreshed,
    "retry": retried,
    "cancel": cancelled,
    "revert": reverted,
    "help": helped,
}


# -- building the 42 MRs -------------------------------------------------------------------------


def open_mrs(world: World) -> list[Pair]:
    """One MR by the author per pair, each changing a file of its own (a revert must find its
    file unchanged since the merge)."""
    pairs = []
    for verb in SETUP:
        for role in ROLES:
            mr = world.gitlab.open_mr(
                PROJECT,
                f"matrix/{verb}-{role}",
                author=AUTHOR,
                files={f"config/matrix/{verb}-{role}.yaml": "replicas: 3\n"},
                title=f"Scale {verb}-{role} to 3",
            )
            pairs.append(Pair(verb, role, mr.iid))
    return pairs


def wait_all(what: str, pending: Callable[[], list[str]], timeout: float = DEADLINE) -> None:
    """Until `pending()` names nothing; on timeout, fails naming what is still pending."""
    left: list[str] = []

    def done() -> bool:
        left[:] = pending()
        return not left

    try:
        wait_until(done, timeout, what, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still pending: {left}") from None


def prepare(world: World, pairs: list[Pair]) -> None:
    """Brings each MR to its verb's state: the author applies it, CI passes or fails by hand."""
    carried = [p for p in pairs if SETUP[p.verb] != "fresh"]
    for pair in carried:
        world.comment(pair.iid, AUTHOR, "/gitops apply")

    def waiting_for_checks() -> list[str]:
        left = []
        for pair in carried:
            ops = world.mr_operations(pair.iid)
            if len(ops) != 1:
                left.append(pair.name)
                continue
            pair.op_id = ops[0]["id"]
            if not any(event == "mr_opened" for *_, event in world.transitions(pair.op_id)):
                left.append(pair.name)
        return left

    wait_all("every carried MR to wait for its check pipeline", waiting_for_checks)
    for pair in carried:
        if SETUP[pair.verb] in ("failed", "validated"):
            world.set_mr_pipeline(pair.iid, "failed" if SETUP[pair.verb] == "failed" else "success")
    target = {"checking": S.MR_CREATING, "failed": S.CREATE_FAILED, "validated": S.VALIDATED}

    def not_there() -> list[str]:
        return [
            f"{p.name}: {world.state(p.op_id)}"
            for p in carried
            if p.op_id is not None and world.state(p.op_id) is not target[SETUP[p.verb]]
        ]

    wait_all("every carried MR to reach its state", not_there)
    for pair in carried:
        if SETUP[pair.verb] == "checking":  # its status comment written: the count is final
            assert pair.op_id is not None
            world.wait_ui(pair.op_id)


# -- typing and judging --------------------------------------------------------------------------


def decided(world: World, pair: Pair) -> bool:
    """The bot has decided on the note: ignored it (the bot's own), or reacted to it.

    Whatever it decided (a wrong decision is judged afterwards, pair by pair); the reply that
    may follow the reaction is posted in the same job, which the inbox then marks done."""
    if pair.role == BOT:
        return bool(world.note_audit(pair.note_id, ":ignored"))
    return bool(world.awards_on(pair.iid, pair.note_id))


def judge(world: World, pair: Pair) -> bool:
    """Fills `pair.problems`; True when a pair that may not act changed anything."""
    acted = ACTED[pair.verb](world, pair)
    changed = snapshot(world, pair) != pair.before
    awards = world.awards_on(pair.iid, pair.note_id)
    replies = world.replies_to(pair.iid, pair.note_id)
    audit = world.note_audit(pair.note_id)
    problem = pair.problems.append
    if pair.role == BOT:
        ignored = world.note_audit(pair.note_id, ":ignored")
        if acted or changed or audit:
            problem(f"the bot's own note acted (changed: {changed}, audit: {audit})")
        if awards or replies:
            problem(f"the bot's own note got a reaction: {awards}, replies {len(replies)}")
        if [r["detail"] for r in ignored] != ["ignored: the bot's own comment"]:
            problem(f"not audited as ignored once: {ignored}")
    elif pair.allowed:
        if not acted:
            problem(f"allowed but did not act; before {pair.before}, now {snapshot(world, pair)}")
        if awards != [("eyes", BOT)]:
            problem(f"awards {awards}, not 👀 by the bot")
        if len(replies) != (1 if pair.verb == "help" else 0):
            problem(f"{len(replies)} replies: {replies}")
    else:
        if acted or changed:
            problem(f"refused but acted; before {pair.before}, now {snapshot(world, pair)}")
        if awards != [("no_entry_sign", BOT)]:
            problem(f"awards {awards}, not 🚫 by the bot")
        refusal = f"`/gitops {pair.verb}` was not run: {pair.verb} needs"
        if len(replies) != 1 or refusal not in replies[0]:
            problem(f"not one refusal reply: {replies}")
        rows = [(r["actor"], r["version"], r["source"], (r["detail"] or "")[:9]) for r in audit]
        if rows != [(pair.role, 0, "command", "refused: ")]:
            problem(f"audit rows {rows}, not one refusal")
    return not pair.allowed and (acted or changed)


def test_every_role_types_every_verb(make_world: Callable[..., World]) -> None:
    """7 roles by 6 verbs on one world of real processes: the allowed pairs act, the refused ones
    change nothing and are answered with 🚫, the bot's own notes are ignored; 0 unauthorized."""
    started = time.monotonic()
    world = make_world(**WORLD_ENV)
    set_flag(world.engine, "poll.pipeline_tiers", PIPELINE_TIERS)
    world.deploy.ci_seconds = None  # MR pipelines pass or fail when the test says
    world.add_people(PEOPLE)
    pairs = open_mrs(world)
    assert len(pairs) == len(ROLES) * len(SETUP) == 42
    prepare(world, pairs)
    for pair in pairs:
        pair.before = snapshot(world, pair)
    prepared = time.monotonic()

    for pair in pairs:
        pair.note_id = world.comment(pair.iid, pair.role, f"/gitops {pair.verb}").id
    wait_all(
        "the bot to decide on every command",
        lambda: [p.name for p in pairs if not decided(world, p)],
    )
    world.wait_inbox_done()  # every delivery processed, replies included
    typed = time.monotonic() - prepared

    unauthorized = [p.name for p in pairs if judge(world, p)]
    record("role matrix: 42 commands typed -> all answered", typed)
    record("role matrix: whole scenario (world, 42 MRs, commands)", time.monotonic() - started)
    record(
        "role matrix: unauthorized actions of 42 role x verb pairs", len(unauthorized), "actions"
    )
    report = [f"{p.name}: {problem}" for p in pairs for problem in p.problems]
    assert report == [], "\n".join(report)
    assert unauthorized == []
