"""Racing instances: exactly one of several firing the same transition wins (PostgreSQL)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.errors import Conflict, IllegalTransition
from bot.store.fire import fire
from tests.builders import AUDIT, binding_state, count, make_operation, operation

THREADS = 8
ROUNDS = 200

pytestmark = pytest.mark.pg


def race(db: Engine, op_id: str, event: E, expected_version: int | None) -> Counter[str]:
    """Fires `event` from THREADS threads released together; counts each thread's outcome."""
    barrier = threading.Barrier(THREADS)

    def one() -> str:
        barrier.wait()
        try:
            fire(db, TransitionRequest(op_id, event, expected_version=expected_version))
        except Conflict:
            return "conflict"
        except IllegalTransition:
            return "illegal"
        return "won"

    with ThreadPoolExecutor(THREADS) as pool:
        return Counter(pool.map(lambda _: one(), range(THREADS)))


def test_one_winner_per_round_for_a_one_way_transition(db: Engine) -> None:
    """8 threads fire APPROVAL_SUBMITTED on the same operation, 200 rounds: one wins each."""
    totals: Counter[str] = Counter()
    for _ in range(ROUNDS):
        op_id = make_operation(db, S.APPROVAL_SENDING)
        outcome = race(db, op_id, E.APPROVAL_SUBMITTED, expected_version=None)
        assert outcome["won"] == 1, outcome
        assert binding_state(db, op_id) is S.APPROVAL_SENT
        assert operation(db, op_id)["version"] == 2
        assert count(db, AUDIT, op_id) == 2
        totals += outcome
    assert totals["won"] == ROUNDS


def test_one_winner_per_round_for_a_self_loop_with_expected_version(db: Engine) -> None:
    """8 threads retry the same MERGING operation holding the same version: one wins a round."""
    op_id = make_operation(db, S.MERGING)
    for _ in range(ROUNDS):
        version = operation(db, op_id)["version"]
        outcome = race(db, op_id, E.RETRY, expected_version=version)
        assert outcome["won"] == 1, outcome
        assert outcome["won"] + outcome["conflict"] == THREADS
        assert operation(db, op_id)["version"] == version + 1
    assert count(db, AUDIT, op_id) == operation(db, op_id)["version"]
