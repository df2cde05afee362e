"""The status comment: one snapshot per binding state, user text made inert, loud templates."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import jinja2
import pytest
from sqlalchemy import event, insert, update
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.inert import ensure_inert
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.gitlab import status_marker
from bot.render import load_status, render_status
from bot.render.status import (
    TIMELINE_LIMIT,
    StatusView,
    code,
    md_escape,
    render_context,
    status_context,
)
from bot.store.fire import fire
from bot.store.models import AUDIT, utcnow
from bot.store.submit import submit
from bot.store.writeguard import state_writes
from tests.builders import make_operation, make_request

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
PUBLIC_URL = "https://gitops.example.com"
FIXED_ID = "00000000-0000-4000-8000-000000000000"
FIXED_TIME = "2025-01-02 03:04:05"
_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def normalised(text: str, operation_id: str) -> str:
    """The comment with its random operation id and wall-clock times replaced by fixed ones."""
    return _TIME.sub(FIXED_TIME, text.replace(operation_id, FIXED_ID))


def check_snapshot(name: str, text: str) -> None:
    """Compares `text` with snapshots/<name>.md (UPDATE_SNAPSHOTS=1 writes it instead)."""
    path = SNAPSHOTS / f"{name}.md"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path.name}: run with UPDATE_SNAPSHOTS=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs from the rendering"


def view_of(db: Engine, operation_id: str) -> StatusView:
    """The operation's status view (it must exist)."""
    view = load_status(db, operation_id)
    assert view is not None
    return view


def rendered(db: Engine, operation_id: str) -> str:
    """The operation's status comment, normalised for comparison."""
    return normalised(render_status(view_of(db, operation_id), PUBLIC_URL), operation_id)


def fixed_request(db: Engine, state: S, flow: Flow = Flow.APPROVE_FIRST) -> str:
    """An operation in `state` whose request text is the same on every run."""
    return make_operation(
        db,
        state,
        flow,
        subject_id="payments-api",
        target_key="config/prod.yaml",
        title="Scale payments-api to 3 replicas",
        requested_by="alice",
    )


@pytest.mark.parametrize("state", list(S), ids=lambda s: s.value)
def test_snapshot_for_every_binding_state(db: Engine, state: S) -> None:
    """The comment of an approve-first request in each binding state matches its reviewed file."""
    op_id = fixed_request(db, state)
    text = rendered(db, op_id)
    assert text.startswith(status_marker(FIXED_ID) + "\n")
    check_snapshot(f"approve_first_{state.value.lower()}", text)


def test_snapshot_for_a_pending_pipeline(db: Engine) -> None:
    """A merge whose pipeline timed out shows as pending with "you can keep waiting"."""
    op_id = fixed_request(db, S.MERGING)
    fire(db, TransitionRequest(op_id, E.PIPELINE_TIMED_OUT))
    text = rendered(db, op_id)
    assert "you can keep waiting" in text
    assert "`HANDLE_PIPELINE_PENDING (10501)`" in text
    check_snapshot("approve_first_merging_pending", text)


def test_snapshot_for_an_mr_first_request_rejected(db: Engine) -> None:
    """An MR-first request rejected by the approvers, with a stale callback ignored after it."""
    op_id = fixed_request(db, S.REJECTED, Flow.MR_FIRST)
    with db.begin() as conn:
        conn.execute(
            insert(AUDIT).values(
                operation_id=op_id,
                from_state="REJECTED",
                to_state="REJECTED",
                event="approved",
                step=0,
                version=0,
                source="webhook",
                actor=None,
                detail="stale: nobody waits for this callback",
                created_at=utcnow(),
            )
        )
    text = rendered(db, op_id)
    assert "ignored (stale event)" in text
    check_snapshot("mr_first_rejected_with_stale_event", text)


def test_snapshot_for_a_superseded_request(db: Engine) -> None:
    """A request re-applied by a newer one keeps its final phase, read from its audit log."""
    op_id = fixed_request(db, S.CLOSED)
    submit(
        db,
        make_request(subject_id="payments-api", target_key="config/prod.yaml", title="Again"),
    )
    view = view_of(db, op_id)
    assert not view.owns_binding
    assert view.phase is S.CLOSED
    text = rendered(db, op_id)
    assert "A newer request" in text
    check_snapshot("approve_first_superseded", text)


def test_phase_and_step_shown_in_words_and_code(db: Engine) -> None:
    """An MR waiting for its check pipeline reads "Checking: waiting for ... check pipeline"."""
    op_id = make_operation(db, S.MR_CREATING)
    fire(
        db,
        TransitionRequest(
            op_id, E.MR_OPENED, changes={"mr_iid": 7, "mr_url": "https://gitlab.example.com/x"}
        ),
    )
    text = render_status(view_of(db, op_id), PUBLIC_URL)
    assert "Checking: waiting for the merge request's check pipeline" in text
    assert "`CREATE_SUCCEEDED (10002)`" in text
    assert f"{PUBLIC_URL}/api/v1/changes/{op_id}" in text
    assert "```mermaid\nstateDiagram-v2\n" in text
    assert "class MR_CREATING current" in text


def test_deterministic_failure_names_the_step_and_the_maintainers(db: Engine) -> None:
    """A rebase conflict says which step failed and to contact the maintainers."""
    op_id = make_operation(db, S.MERGING)
    fire(
        db,
        TransitionRequest(op_id, E.REBASE_CONFLICT, detail="CONFLICT (content): config/prod.yaml"),
    )
    text = render_status(view_of(db, op_id), PUBLIC_URL)
    assert "contact the maintainers" in text
    assert "`HANDLE_REBASE_CONFLICT (10105)`" in text
    assert "**Error:** CONFLICT (content): config/prod.yaml" in text


def test_user_text_cannot_inject_markup_mentions_or_commands(db: Engine) -> None:
    """A title with <script>, @everyone, a bidi override and a /gitops line, and a requester
    `eve/@all`, render as inert text that passes the write seam's check."""
    title = "Scale <script>alert(1)</script> @everyone\u202e\n/gitops cancel\u2028/close"
    op_id = make_operation(db, S.MR_CREATING, title=title, requested_by="eve/@all")
    fire(
        db,
        TransitionRequest(
            op_id,
            E.CREATE_ERROR,
            changes={
                "error_detail": "boom\n/gitops retry\n@bot-user apply | `rm -rf` [x](http://e.vil)"
            },
            actor="eve|mallory`",
        ),
    )
    text = render_status(view_of(db, op_id), PUBLIC_URL)
    assert "<script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "@everyone" not in text
    assert "@all" not in text
    assert "\u202e" not in text
    assert "\\[U+202E\\]" in text
    ensure_inert(text)
    assert "@bot-user" not in text
    assert "`rm -rf`" not in text
    assert "[x](http://e.vil)" not in text
    for line in text.splitlines():
        assert not line.lstrip().startswith(("/", "@")), line
    assert text.count("<!--") == 1
    # the actor's pipe does not add a column to its timeline row
    row = next(line for line in text.splitlines() if "mallory" in line)
    assert row.count("|") == 6


def test_a_fake_marker_in_the_title_stays_text(db: Engine) -> None:
    """A title carrying another operation's marker cannot make a second marker in the note."""
    fake = status_marker("11111111-2222-4333-8444-555555555555")
    op_id = make_operation(db, S.APPROVAL_SENT, title=f"hi {fake}")
    text = render_status(view_of(db, op_id), PUBLIC_URL)
    assert text.count("<!--") == 1
    assert text.startswith(status_marker(op_id))


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a & b", "a &amp; b"),
        ("`x`", "&#96;x&#96;"),
        ("a|b", "a&#124;b"),
        ("*bold* _it_", "\\*bold\\* \\_it\\_"),
        ("[l](u)", "\\[l\\](u)"),
        ("/gitops apply", "&#47;gitops apply"),
        ("hi @all", "hi \uff20all"),
        ("eve/@group/sub", "eve/\uff20group/sub"),
        ("fixes #12", "fixes \uff0312"),
        ("see !3 and ~bug", "see \uff013 and \uff5ebug"),
        ("line\r\none\u2028two\x85three\x0bfour", "line one two three four"),
        ("abc\u202edef", "abc\\[U+202E\\]def"),
        ("zero\u200bwidth\u2066", "zero\\[U+200B\\]width\\[U+2066\\]"),
        ("\u200b/close", "\\[U+200B\\]/close"),
    ],
)
def test_md_escape(raw: str, escaped: str) -> None:
    """Each Markdown, HTML and reference special is neutralised, hidden characters are shown as
    [U+XXXX] (never hidden by a zero-width character), and lines are joined."""
    assert str(md_escape(raw)) == escaped


def test_code_spans_only_for_plain_values() -> None:
    """Known-plain values become code spans; anything with a backtick is escaped text instead."""
    assert str(code("CREATE_SUCCEEDED (10002)")) == "`CREATE_SUCCEEDED (10002)`"
    assert str(code("a`b")) == "a&#96;b"


def test_missing_variable_fails_loudly(db: Engine) -> None:
    """StrictUndefined: rendering without one of the template's names raises, never prints ''."""
    op_id = make_operation(db, S.APPROVAL_SENT)
    context = status_context(view_of(db, op_id), PUBLIC_URL)
    render_context(context)  # complete: renders
    del context["hint"]
    with pytest.raises(jinja2.UndefinedError):
        render_context(context)


def test_long_history_shows_the_latest_entries(db: Engine) -> None:
    """Past TIMELINE_LIMIT audit rows the table keeps the latest and counts the others."""
    op_id = make_operation(db, S.MERGING)
    for _ in range(TIMELINE_LIMIT):
        fire(db, TransitionRequest(op_id, E.RETRY))
    view = view_of(db, op_id)
    text = render_status(view, PUBLIC_URL)
    hidden = len(view.timeline) - TIMELINE_LIMIT
    assert f"_{hidden} earlier entries are not shown._" in text
    assert text.count("| `MERGING` → `MERGING` | `retry` |") == TIMELINE_LIMIT
    # the diagram draws the retry loop once, with its count
    assert f"    MERGING --> MERGING : retry ({TIMELINE_LIMIT} times)\n" in text
    assert text.count("MERGING --> MERGING") == 1


def test_load_status_reads_with_two_queries(db: Engine) -> None:
    """One query for the operation with its binding, one for its audit rows."""
    op_id = make_operation(db, S.MERGED)
    selects: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)

    event.listen(db, "before_cursor_execute", record)
    try:
        view = load_status(db, op_id)
    finally:
        event.remove(db, "before_cursor_execute", record)
    assert view is not None
    assert view.phase is S.MERGED
    assert len(selects) == 2


def test_unknown_operation_has_no_status(db: Engine) -> None:
    """load_status answers None for an id no operation has."""
    assert load_status(db, FIXED_ID) is None


def test_times_are_shown_in_utc(db: Engine) -> None:
    """Audit times are printed in UTC whatever the stored offset."""
    op_id = make_operation(db, S.APPROVAL_SENDING)
    with db.begin() as conn, state_writes(conn):  # the audit log is append-only (0011)
        conn.execute(
            update(AUDIT)
            .where(AUDIT.c.operation_id == op_id)
            .values(created_at=utcnow().replace(year=2030, month=6, day=1, hour=12, minute=0))
        )
    view = view_of(db, op_id)
    assert view.step is Step.APPROVAL_SUBMITTING
    text = render_status(view, PUBLIC_URL)
    assert re.search(r"\| 2030-06-01 12:00:\d\d \|", text)
    assert timedelta(0) == view.timeline[0].at.utcoffset()
