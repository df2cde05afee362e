"""bot/core/hints.py: every (state, step) the table can produce has a hint of the right kind."""

from __future__ import annotations

import pytest

from bot.core.hints import HINT_KINDS, STEP_WORDS, Hint, hint_for, words
from bot.core.states import FAILED, REAPPLY_AFTER, BindingState, Phase, Step
from bot.core.states import BindingState as S
from bot.core.table import TABLE

#: Every (state, step) an operation can be left in: the target and step of each table row.
REACHABLE = sorted({(row.target, row.step) for row in TABLE})


def expected_kind(state: BindingState, step: Step) -> str:
    """The kind the contract asks for, stated independently of the implementation."""
    if state in FAILED or (state is S.MERGED and step is Step.CALLBACK_DEPLOY_FAILED):
        return "failed"
    if step.phase is Phase.WAITING:
        return "pending"
    if state is S.APPROVAL_SENT:
        return "waiting"
    if state is S.VALIDATED:
        return "done"
    if state in (S.REJECTED, S.CLOSED):
        return "closed"
    return "in_progress"


@pytest.mark.parametrize(("state", "step"), REACHABLE, ids=[f"{a}-{b.name}" for a, b in REACHABLE])
def test_every_reachable_pair_has_a_hint_of_the_right_kind(state: BindingState, step: Step) -> None:
    """Each (state, step) the table produces gets a non-empty hint of the expected kind."""
    hint = hint_for(state, step)
    assert isinstance(hint, Hint)
    assert hint.kind in HINT_KINDS
    assert hint.kind == expected_kind(state, step)
    assert len(hint.text) > 20


def test_reachable_pairs_cover_every_kind() -> None:
    """The table reaches every kind of hint (so the test above checks each of them)."""
    assert {expected_kind(state, step) for state, step in REACHABLE} == set(HINT_KINDS)


@pytest.mark.parametrize(
    ("state", "step"), [(s, p) for s, p in REACHABLE if expected_kind(s, p) == "failed"]
)
def test_failures_name_the_step_and_tell_whom_to_ask(state: BindingState, step: Step) -> None:
    """A failure names its step in words, says "contact the maintainers" and when to retry; a
    stop over content (changed after approval, a refused path) says to re-apply instead."""
    text = hint_for(state, step).text
    assert words(step) in text
    assert "contact the maintainers" in text
    if step is Step.HANDLE_CHANGED_AFTER_APPROVAL:
        assert "Re-apply" in text
        assert "a retry cannot help" in text
    else:
        assert "retry" in text
    if step in REAPPLY_AFTER:
        assert "re-apply" in text.lower()


@pytest.mark.parametrize(
    ("state", "step"), [(s, p) for s, p in REACHABLE if expected_kind(s, p) == "pending"]
)
def test_pending_says_you_can_keep_waiting(state: BindingState, step: Step) -> None:
    """An unknown outcome says "you can keep waiting" and never calls itself a failure."""
    text = hint_for(state, step).text
    assert "you can keep waiting" in text
    assert "contact the maintainers" not in text


@pytest.mark.parametrize(
    ("step", "why"),
    [
        (Step.CLOSE_REJECTED, "rejected"),
        (Step.CLOSE_WITHDRAWN, "withdrawn"),
        (Step.CLOSE_CANCELLED, "cancelled"),
        (Step.CLOSE_MR_CLOSED, "merge request was closed"),
    ],
)
def test_closed_says_why(step: Step, why: str) -> None:
    """A closed request says why it closed: rejected, withdrawn, cancelled or MR closed."""
    state = S.REJECTED if step in (Step.CLOSE_REJECTED, Step.CLOSE_WITHDRAWN) else S.CLOSED
    assert why in hint_for(state, step).text


def test_overload_asks_for_a_later_retry() -> None:
    """An overloaded request is told to retry when the load has dropped."""
    text = hint_for(S.CREATE_FAILED, Step.CREATE_OVERLOADED).text
    assert "retry in a few minutes" in text


def test_every_step_has_words() -> None:
    """Every step code is described in words (a new step without words fails here)."""
    assert set(STEP_WORDS) == set(Step)
    assert all(STEP_WORDS[step] for step in Step)


def test_hint_is_deterministic_and_frozen() -> None:
    """The same input gives an equal hint, and a hint cannot be changed after the fact."""
    hint = hint_for(S.MERGING, Step.HANDLE_STARTED)
    assert hint == hint_for(S.MERGING, Step.HANDLE_STARTED)
    with pytest.raises(AttributeError):
        hint.text = "changed"  # type: ignore[misc]
