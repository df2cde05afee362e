"""The outbox dispatcher: coalescing, re-delivery, labels, retries, closing and withdrawing."""

from __future__ import annotations

from datetime import timedelta

import pytest
import responses
from prometheus_client import REGISTRY
from sqlalchemy import delete, update
from sqlalchemy.engine import Engine

from bot.app import outbox
from bot.app.outbox import POSTING, REFUSALS_MAX
from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.gitlab import status_marker
from bot.store.fire import fire
from bot.store.models import OPERATIONS, OUTBOX, utcnow
from bot.store.outbox import LEASE, claim, pending_count
from bot.store.submit import submit
from jobs.outbox import dispatch
from tests.builders import make_request
from tests.outbox import APPROVAL_URL, PERSON, PROJECT, Harness, add_row


def dead_total(effect: str) -> float:
    """The dead-row counter for `effect`."""
    return REGISTRY.get_sample_value("gitops_outbox_dead_total", {"effect": effect}) or 0.0


def test_burst_of_transitions_makes_one_note_and_one_labels_call(h: Harness) -> None:
    """Five transitions on the MR, one dispatch: one note created, one labels PUT, latest state
    (and the merged branch's delete, which MERGED writes)."""
    op_id, iid = h.operation(S.MERGED)
    # MR_OPENED .. MERGED: status + labels each, and MERGED's delete_branch
    assert len(h.unsent(op_id)) == 11
    report = dispatch(now=utcnow())
    assert (report.claimed, report.sent, report.failed, report.coalesced) == (11, 11, 0, 8)
    assert h.double.count("POST", path_endswith="/notes") == 1
    assert h.double.count("PUT", path_contains="/notes/") == 0
    assert h.label_calls(iid) == 1
    notes = h.notes(iid)
    assert len(notes) == 1
    assert notes[0].body.startswith(status_marker(op_id))
    assert "Merged: waiting for the deployment" in notes[0].body
    assert "`HANDLE_MERGED (10103)`" in notes[0].body
    assert h.gitops_labels(iid) == ["gitops::merged"]
    assert h.unsent(op_id) == []


def test_dispatching_again_after_everything_was_sent_calls_nothing(h: Harness) -> None:
    """A second dispatch (a duplicate scheduler tick) finds nothing due and calls nobody."""
    h.operation(S.MR_CREATED)
    dispatch(now=utcnow())
    calls = len(h.double.calls)
    report = dispatch(now=utcnow() + timedelta(hours=1))
    assert report.claimed == 0
    assert len(h.double.calls) == calls


def test_same_rows_dispatched_twice_leave_one_note(h: Harness) -> None:
    """Rows sent once and then delivered again (a replay) find the note by its marker."""
    op_id, iid = h.operation(S.MERGING)
    dispatch(now=utcnow())
    with h.db.begin() as conn:
        conn.execute(update(OUTBOX).values(sent_at=None, next_attempt_at=utcnow()))
    report = dispatch(now=utcnow())
    assert report.sent == len(h.rows(op_id))
    assert len(h.notes(iid)) == 1
    assert h.double.count("POST", path_endswith="/notes") == 1
    # the body did not change, so it was not written again either
    assert h.double.count("PUT", path_contains="/notes/") == 0


def test_lost_outbox_rows_still_one_note_edited_in_place(h: Harness) -> None:
    """The operation's outbox rows are lost; the next transition's row edits the same note."""
    op_id, iid = h.operation(S.MERGED)
    dispatch(now=utcnow())
    (first,) = h.notes(iid)
    with h.db.begin() as conn:
        conn.execute(delete(OUTBOX).where(OUTBOX.c.operation_id == op_id))
    fire(h.db, TransitionRequest(op_id, E.DEPLOYED))
    dispatch(now=utcnow())
    (note,) = h.notes(iid)
    assert note.id == first.id
    assert "In effect" in note.body
    assert h.double.count("POST", path_endswith="/notes") == 1
    assert h.double.count("PUT", path_contains="/notes/") == 1
    assert h.gitops_labels(iid) == ["gitops::in-effect"]


def test_the_first_status_comment_is_posted_without_listing_the_mrs_comments(h: Harness) -> None:
    """No status comment of the operation was ever posted: nothing to look for, one POST."""
    _, iid = h.operation(S.MR_CREATED)
    dispatch(now=utcnow())
    assert len(h.notes(iid)) == 1
    assert h.double.count("POST", path_endswith="/notes") == 1
    assert h.double.count("GET", path_endswith="/notes") == 0


def test_a_crash_after_posting_the_first_comment_leaves_one_comment(h: Harness) -> None:
    """The first POST went through but its id was never recorded (the process died between
    the two): the next try finds the comment by its marker and edits it, never a second one."""
    op_id, iid = h.operation(S.MERGED)
    dispatch(now=utcnow())
    (first,) = h.notes(iid)
    with h.db.begin() as conn:  # what the crash leaves: "being posted", no id
        conn.execute(
            update(OPERATIONS)
            .where(OPERATIONS.c.id == op_id)
            .values(status_note_id=None, status_note_hash=POSTING)
        )
    fire(h.db, TransitionRequest(op_id, E.DEPLOYED))
    dispatch(now=utcnow())
    (note,) = h.notes(iid)
    assert note.id == first.id
    assert "In effect" in note.body
    assert h.double.count("POST", path_endswith="/notes") == 1
    assert h.double.count("GET", path_endswith="/notes") == 1


def test_labels_leave_exactly_one_gitops_label_through_the_phases(h: Harness) -> None:
    """checking -> merging -> merged: each dispatch leaves one gitops:: label, others untouched."""
    mr = h.double.open_mr(
        PROJECT, "labelled", author="gitops-bot", labels=["gitops::failed", "team::platform"]
    )
    op_id, iid = h.operation(S.MR_CREATED, iid=mr.iid)
    dispatch(now=utcnow())
    assert h.gitops_labels(iid) == ["gitops::checking"]
    fire(h.db, TransitionRequest(op_id, E.HANDLE_START))
    dispatch(now=utcnow())
    assert h.gitops_labels(iid) == ["gitops::merging"]
    fire(h.db, TransitionRequest(op_id, E.APPROVALS_GIVEN))
    fire(h.db, TransitionRequest(op_id, E.MERGED, changes={"merge_commit_sha": "a" * 40}))
    dispatch(now=utcnow())
    assert h.gitops_labels(iid) == ["gitops::merged"]
    assert "team::platform" in h.double.mr(PROJECT, iid).labels
    assert h.label_calls(iid) == 3


def test_server_error_backs_off_then_sends(h: Harness) -> None:
    """A 500 backs the row off (attempt 1, due later); "now" sends nothing; later sends it."""
    op_id, iid = h.checking()
    h.double.fail_next(1, status=500)
    t0 = utcnow()
    report = dispatch(now=t0)
    assert (report.failed, report.deferred, report.sent) == (1, 1, 0)
    rows = h.unsent(op_id)
    assert len(rows) == 2
    assert all(row["next_attempt_at"] > t0 for row in rows)
    failed = [row for row in rows if row["attempts"] == 1]
    assert len(failed) == 1
    assert "500" in failed[0]["last_error"]
    calls = len(h.double.calls)
    assert dispatch(now=t0).claimed == 0
    assert len(h.double.calls) == calls
    later = max(row["next_attempt_at"] for row in rows)
    report = dispatch(now=later)
    assert report.sent == 2
    assert h.unsent(op_id) == []
    assert len(h.notes(iid)) == 1
    assert h.gitops_labels(iid) == ["gitops::checking"]


def test_rate_limit_waits_for_retry_after(h: Harness) -> None:
    """A 429 with Retry-After 120 puts the row (and the rest of GitLab's work) off 120 s."""
    op_id, _ = h.checking()
    h.double.fail_next(1, status=429, retry_after=120)
    t0 = utcnow()
    report = dispatch(now=t0)
    assert report.failed == 1
    assert report.deferred == 1
    for row in h.unsent(op_id):
        assert row["next_attempt_at"] >= t0 + timedelta(seconds=120)
    assert dispatch(now=t0 + timedelta(seconds=119)).claimed == 0
    assert dispatch(now=t0 + timedelta(seconds=120)).sent == 2


def test_close_on_rejected_closes_the_bots_mr(h: Harness) -> None:
    """Approvers reject an MR-first request on the bot's MR: the MR is closed, labelled rejected."""
    op_id, iid = h.operation(S.REJECTED, Flow.MR_FIRST, by_bot=True)
    assert [r["effect"] for r in h.rows(op_id)].count("close_mr") == 1
    dispatch(now=utcnow())
    assert h.double.mr(PROJECT, iid).state == "closed"
    assert h.gitops_labels(iid) == ["gitops::rejected"]
    (note,) = h.notes(iid)
    assert "Rejected" in note.body


def test_a_persons_mr_is_never_closed(h: Harness) -> None:
    """A person's MR is not closed on reject: no row is written, and a stray row is refused."""
    op_id, iid = h.operation(S.REJECTED, Flow.MR_FIRST, by_bot=False)
    assert "close_mr" not in [r["effect"] for r in h.rows(op_id)]
    add_row(h, op_id, "close_mr")
    dispatch(now=utcnow())
    assert h.double.mr(PROJECT, iid).state == "opened"
    (row,) = [r for r in h.rows(op_id) if r["effect"] == "close_mr"]
    assert row["sent_at"] is not None
    assert row["last_error"] == "skipped: not the bot's MR"
    assert h.double.mr(PROJECT, iid).author_id == h.double.user(PERSON).id


def test_cancel_withdraws_the_approval_once(h: Harness) -> None:
    """Cancelling a request waiting for approvers withdraws its approval request, once."""
    h.rsps.add(responses.POST, f"{APPROVAL_URL}/approvals/apr-1/withdraw", json={}, status=200)
    op_id, _ = h.operation(S.APPROVAL_SENT)
    fire(h.db, TransitionRequest(op_id, E.CANCEL))
    assert [r["effect"] for r in h.unsent(op_id)] == ["withdraw_approval"]
    report = dispatch(now=utcnow())
    assert report.sent == 1
    assert h.withdraw_calls("apr-1") == 1
    dispatch(now=utcnow() + timedelta(hours=1))
    assert h.withdraw_calls("apr-1") == 1


def test_withdraw_retried_after_the_approval_system_fails(h: Harness) -> None:
    """A 503 from the approval system backs the withdrawal off; the next try sends it."""
    url = f"{APPROVAL_URL}/approvals/apr-1/withdraw"
    h.rsps.add(responses.POST, url, json={}, status=503)
    h.rsps.add(responses.POST, url, json={}, status=200)
    op_id, _ = h.operation(S.APPROVAL_SENT)
    fire(h.db, TransitionRequest(op_id, E.CANCEL))
    t0 = utcnow()
    assert dispatch(now=t0).failed == 1
    (row,) = h.unsent(op_id)
    assert row["attempts"] == 1
    assert dispatch(now=row["next_attempt_at"]).sent == 1
    assert h.withdraw_calls("apr-1") == 2


def test_pending_count_drops_to_zero_after_a_successful_dispatch(h: Harness) -> None:
    """The pending gauge's query counts unsent rows, and none are left after a dispatch."""
    h.operation(S.MERGING)
    assert pending_count(h.db) == 6
    dispatch(now=utcnow())
    assert pending_count(h.db) == 0


def test_no_mr_yet_is_marked_sent_without_a_call(h: Harness) -> None:
    """A status row for an operation with no MR is marked sent with a note and calls nobody."""
    op_id, _ = h.operation(S.APPROVAL_SENT)
    add_row(h, op_id, "status_comment")
    add_row(h, op_id, "labels")
    calls = len(h.double.calls)
    report = dispatch(now=utcnow())
    assert report.sent == 2
    assert len(h.double.calls) == calls
    assert {r["last_error"] for r in h.rows(op_id)} == {"skipped: no MR yet"}


def test_superseded_operation_does_not_set_labels(h: Harness) -> None:
    """A late labels row of a request that was re-applied leaves the MR's label to the new one."""
    op_id, iid = h.operation(S.CLOSED, subject_id="svc-x", target_key="cfg")
    dispatch(now=utcnow())
    submit(h.db, make_request(subject_id="svc-x", target_key="cfg", project=PROJECT))
    add_row(h, op_id, "labels")
    calls = h.label_calls(iid)
    dispatch(now=utcnow())
    assert h.label_calls(iid) == calls
    assert h.rows(op_id)[-1]["last_error"] == "skipped: superseded by a newer request"


def test_deterministic_failure_goes_dead_after_max_attempts(h: Harness) -> None:
    """An MR that does not exist (404) is retried REFUSALS_MAX times, then dead, counted once
    and never claimed again."""
    op_id, _ = h.checking(iid=999)
    before = dead_total("labels")
    now = utcnow()
    for attempt in range(1, REFUSALS_MAX + 1):
        report = dispatch(now=now)
        assert report.failed == 2
        rows = h.unsent(op_id)
        assert {r["attempts"] for r in rows} == {attempt}
        now = max(r["next_attempt_at"] for r in rows)
    assert report.dead == 2
    assert all(r["last_error"].startswith("dead: NotFound") for r in rows)
    assert all(r["dead_at"] is not None for r in rows)
    assert dead_total("labels") == before + 1
    assert dispatch(now=now + timedelta(days=30)).claimed == 0  # dead: never taken again
    assert dead_total("labels") == before + 1
    assert len(h.unsent(op_id)) == 2


def test_one_broken_operation_does_not_stop_the_others(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected error reading one operation backs its rows off; the next one is sent."""
    broken, _ = h.checking()
    fine, iid = h.checking()
    real = outbox.load_status

    def load(engine: Engine, operation_id: str) -> object:
        if operation_id == broken:
            raise RuntimeError("boom")
        return real(engine, operation_id)

    monkeypatch.setattr(outbox, "load_status", load)
    report = dispatch(now=utcnow())
    assert (report.sent, report.failed) == (2, 2)
    assert h.unsent(fine) == []
    assert len(h.notes(iid)) == 1
    assert {r["attempts"] for r in h.unsent(broken)} == {1}
    assert {r["last_error"] for r in h.unsent(broken)} == {"RuntimeError: boom"}


def test_rows_of_a_crashed_dispatcher_come_back_after_the_lease(h: Harness) -> None:
    """Rows claimed by a dispatcher that died are not taken again before the lease ends."""
    op_id, iid = h.checking()
    now = utcnow()
    assert len(claim(h.db, 100, now)) == 2  # ...and the dispatcher dies here
    assert dispatch(now=now).claimed == 0
    assert dispatch(now=now + LEASE - timedelta(seconds=1)).claimed == 0
    assert dispatch(now=now + LEASE).sent == 2
    assert len(h.notes(iid)) == 1
    assert h.unsent(op_id) == []


def test_a_dispatch_out_of_time_leaves_rows_to_their_lease(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its time budget a dispatch starts no operation; its claimed rows wait for the lease."""
    op_id, _ = h.checking()
    monkeypatch.setattr(outbox, "WORK_BUDGET_SECONDS", -1.0)
    now = utcnow()
    calls = len(h.double.calls)
    report = dispatch(now=now)
    assert (report.claimed, report.released, report.sent) == (2, 2, 0)
    assert len(h.double.calls) == calls
    assert {r["next_attempt_at"] for r in h.unsent(op_id)} == {now + LEASE}
