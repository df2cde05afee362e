"""The outbox's effect kinds: every `Effect` reaches its own handler; any other kind does nothing.

A row's stored kind is parsed into `Effect` once. A kind this version does not know is a counted,
permanent failure of that row: never performed as some other effect (least of all closing the
MR), no GitLab call, dead at once and reported.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import update

from bot.app import outbox
from bot.app.outbox import ORDER, UNKNOWN, parse_effect
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.core.table import Effect
from bot.render.status import StatusView
from bot.store.models import OUTBOX, utcnow
from jobs.outbox import dispatch
from tests.outbox import PROJECT, Harness, add_row

#: The `_Dispatch` method each effect must reach. A new `Effect` member without an entry here
#: fails `test_each_effect_reaches_its_handler` (and, without a `case`, mypy).
HANDLERS: dict[Effect, str] = {
    Effect.STATUS_COMMENT: "_status_comment",
    Effect.LABELS: "_labels",
    Effect.CLOSE_MR: "_close_mr",
    Effect.WITHDRAW_APPROVAL: "_withdraw_approval",
    Effect.UNAPPROVE: "_unapprove",
    Effect.CALLBACK: "_callback",
    Effect.DELETE_BRANCH: "_delete_branch",
}

#: Kinds that are no `Effect` (the second one is close_mr's member name, not its value).
UNKNOWN_KINDS = ["bogus", "CLOSE_MR", "close_mr ", ""]


def mark_all_sent(h: Harness) -> None:
    """Every row written so far counts as sent (without performing it)."""
    with h.db.begin() as conn:
        conn.execute(update(OUTBOX).values(sent_at=utcnow()))


def sample(name: str, effect: str) -> float:
    """An outbox counter's value for `effect`."""
    return REGISTRY.get_sample_value(name, {"effect": effect}) or 0.0


def test_every_effect_is_parsed_and_ordered() -> None:
    """Each Effect's stored value parses back to it and has its place in the run order."""
    for effect in Effect:
        assert parse_effect(effect.value) is effect
    assert sorted(ORDER) == sorted(Effect)
    assert set(HANDLERS) == set(Effect)


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_unknown_kinds_do_not_parse(kind: str) -> None:
    """Anything but an Effect's exact value is no effect."""
    assert parse_effect(kind) is None


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_an_unknown_kind_never_closes_the_mr_nor_calls_gitlab(h: Harness, kind: str) -> None:
    """On the bot's MR of a rejected request (where close_mr would close it) an unknown row is
    performed as nothing: no call, the MR stays open; the row is dead at once and reported."""
    op_id, iid = h.operation(S.REJECTED, Flow.MR_FIRST, by_bot=True)
    mark_all_sent(h)
    add_row(h, op_id, kind)
    failures, dead = (
        sample("gitops_outbox_failures_total", UNKNOWN),
        sample("gitops_outbox_dead_total", UNKNOWN),
    )
    calls, requests = len(h.double.calls), len(h.rsps.calls)
    now = utcnow()
    report = dispatch(now=now)
    assert (report.claimed, report.sent, report.failed, report.unknown, report.dead) == (
        1,
        0,
        1,
        1,
        1,
    )
    assert len(h.double.calls) == calls
    assert len(h.rsps.calls) == requests  # nobody else was called either
    assert h.double.mr(PROJECT, iid).state == "opened"
    (row,) = h.unsent(op_id)
    assert row["effect"] == kind
    assert row["attempts"] == 1
    assert row["last_error"] == f"dead: unknown outbox effect {kind!r}"
    assert row["dead_at"] == now
    assert sample("gitops_outbox_failures_total", UNKNOWN) == failures + 1
    assert sample("gitops_outbox_dead_total", UNKNOWN) == dead + 1

    # dead: never claimed again (a day later nothing is tried, nothing counted)
    report = dispatch(now=now + timedelta(days=1))
    assert (report.claimed, report.failed, report.unknown, report.dead) == (0, 0, 0, 0)
    assert len(h.double.calls) == calls
    assert h.double.mr(PROJECT, iid).state == "opened"
    assert sample("gitops_outbox_dead_total", UNKNOWN) == dead + 1
    assert h.unsent(op_id)[0]["attempts"] == 1


def test_an_unknown_row_does_not_stop_the_operations_other_effects(h: Harness) -> None:
    """Beside an unknown row, the operation's known rows are performed as usual."""
    op_id, iid = h.checking()
    add_row(h, op_id, "bogus")
    report = dispatch(now=utcnow())
    assert (report.claimed, report.sent, report.failed, report.unknown) == (3, 2, 1, 1)
    assert len(h.notes(iid)) == 1
    assert h.gitops_labels(iid) == ["gitops::checking"]
    assert [r["effect"] for r in h.unsent(op_id)] == ["bogus"]


@pytest.mark.parametrize("effect", list(Effect))
def test_each_effect_reaches_its_handler(
    h: Harness, monkeypatch: pytest.MonkeyPatch, effect: Effect
) -> None:
    """A row of each Effect is performed by its own handler, and by no other."""
    reached: list[tuple[str, str]] = []

    def recorder(name: str) -> Callable[..., None]:
        def handler(self: object, view: StatusView, *row: object) -> None:
            reached.append((name, view.operation_id))

        return handler

    for name in HANDLERS.values():
        monkeypatch.setattr(outbox._Dispatch, name, recorder(name))
    op_id, _ = h.checking()
    mark_all_sent(h)
    add_row(h, op_id, effect.value)
    report = dispatch(now=utcnow() + timedelta(seconds=1))
    assert reached == [(HANDLERS[effect], op_id)]
    assert (report.claimed, report.sent, report.failed, report.unknown) == (1, 1, 0, 0)
    assert h.unsent(op_id) == []
