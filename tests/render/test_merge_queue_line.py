"""The merge queue in words: ordinals, where a change stands, and the status comment's line
(inert whatever the branch is called)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bot.app.promote import promote
from bot.core.events import Event as E
from bot.core.inert import ensure_inert
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.render import load_status, render_status
from bot.render.queue import WRITTEN, ordinal, place_words
from bot.render.status import StatusView
from bot.store.fire import fire
from bot.store.queue import Place
from tests.api import fake_services
from tests.builders import make_operation, merge_line

PUBLIC_URL = "https://gitops.example.com"


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (10, "10th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (14, "14th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (101, "101st"),
        (111, "111th"),
        (112, "112th"),
        (113, "113th"),
        (122, "122nd"),
    ],
)
def test_ordinal(n: int, words: str) -> None:
    """st, nd, rd after 1, 2, 3, except in the teens of each hundred; th otherwise."""
    assert ordinal(n) == words


def at(position: int, size: int, *, head: int | None = 1, paused: bool = False) -> Place:
    """A place in a line of `size` on main whose head is at position `head`."""
    return Place(
        project="platform/config",
        target_branch="main",
        position=position,
        size=size,
        head=None if head is None else f"op-{head}",
        operation_id=f"op-{position}",
        paused=paused,
    )


HEAD_BEHIND_ONE = "2nd in line for main: merging next; the change ahead waits for its pipeline"
HEAD_BEHIND_TWO = "3rd in line for main: merging next; the 2 changes ahead wait for their pipelines"
PAUSED_FIRST = (
    "first in line for main when this comment was written, waiting for its pipeline; "
    "the next change goes ahead"
)
PAUSED_LAST = "2nd in line for main when this comment was written, waiting for its pipeline"


@pytest.mark.parametrize(
    ("place", "words"),
    [
        (at(1, 1), "first in line for main: merging next"),
        (at(1, 3), "first in line for main: merging next"),
        (at(2, 3, head=2), HEAD_BEHIND_ONE),
        (at(3, 3, head=3), HEAD_BEHIND_TWO),
        (at(2, 3), "2nd in line for main when this comment was written (1 ahead)"),
        (at(12, 12), "12th in line for main when this comment was written (11 ahead)"),
        (at(1, 2, head=2, paused=True), PAUSED_FIRST),
        (at(2, 2, head=None, paused=True), PAUSED_LAST),
    ],
)
def test_place_words(place: Place, words: str) -> None:
    """The head merges next; the others say their place and when it held; a paused change
    lets the next go ahead."""
    assert place_words(place, "main", when=WRITTEN) == words


def view_of(db: Engine, op_id: str) -> StatusView:
    """The operation's status view (it must exist)."""
    view = load_status(db, op_id)
    assert view is not None
    return view


def queue_lines(db: Engine, op_id: str) -> list[str]:
    """The status comment's merge queue lines."""
    text = render_status(view_of(db, op_id), PUBLIC_URL)
    return [row for row in text.splitlines() if row.startswith("- **Merge queue:**")]


def test_each_change_in_a_line_says_where_it_stands(db: Engine) -> None:
    """The head merges next; the others give their place, hedged by when it was written."""
    first, second, third = merge_line(db, 3)

    assert queue_lines(db, first) == ["- **Merge queue:** first in line for `main`: merging next"]
    assert queue_lines(db, third) == [
        "- **Merge queue:** 3rd in line for `main` when this comment was written (2 ahead)"
    ]
    fire(db, TransitionRequest(first, E.PIPELINE_TIMED_OUT))
    assert queue_lines(db, first) == [
        "- **Merge queue:** first in line for `main` when this comment was written, waiting for "
        "its pipeline; the next change goes ahead"
    ]
    assert queue_lines(db, second) == [
        "- **Merge queue:** 2nd in line for `main`: merging next; the change ahead waits for "
        "its pipeline"
    ]


@pytest.mark.parametrize("state", [S.MR_CREATED, S.MERGED, S.HANDLE_FAILED, S.CLOSED])
def test_no_queue_line_outside_merging(db: Engine, state: S) -> None:
    """Before the line and after it, the comment has no merge queue line."""
    op_id = make_operation(db, state)
    assert view_of(db, op_id).queue is None
    assert queue_lines(db, op_id) == []


def test_a_path_like_branch_is_a_code_span(db: Engine) -> None:
    """Branch names with slashes are shown as code, as `main` is."""
    [op_id] = merge_line(db, 1, target_branch="release/2025.1")
    assert queue_lines(db, op_id) == [
        "- **Merge queue:** first in line for `release/2025.1`: merging next"
    ]


@pytest.mark.parametrize(
    "branch",
    [
        "x` @all `y",
        "main\n/gitops cancel",
        "/close",
        "feat/@everyone",
        "a\u202eb #1 !2",
        "*bold* [l](http://e.vil) <b>|</b>",
    ],
)
def test_a_hostile_branch_stays_inert(db: Engine, branch: str) -> None:
    """Whatever the branch is called, the line adds no markup, mention, reference, hidden
    character or quick action, and breaks out of no code span."""
    _, op_id = merge_line(db, 2, target_branch=branch)

    text = render_status(view_of(db, op_id), PUBLIC_URL)

    [row] = [r for r in text.splitlines() if r.startswith("- **Merge queue:** 2nd in line for ")]
    assert row.endswith(" when this comment was written (1 ahead)")
    assert "`" not in row
    assert "@all" not in row
    assert "@everyone" not in row
    assert "<b>" not in row
    assert "[l](http" not in row  # the brackets are escaped: no link
    for each in text.splitlines():
        assert not each.lstrip().startswith("/"), each
    ensure_inert(text)


def test_a_promotion_is_in_the_comments_timeline(db: Engine) -> None:
    """The promotion's audit row reads as a move to the front, not as an ignored event."""
    _, second = merge_line(db, 2)
    promote(fake_services(db), second, actor="api")

    text = render_status(view_of(db, second), PUBLIC_URL)

    assert "| moved to the front of its merge queue | `promote` | operator | api |" in text
    assert "ignored (stale event)" not in text
    assert queue_lines(db, second) == ["- **Merge queue:** first in line for `main`: merging next"]
