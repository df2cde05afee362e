"""Outbox rows that fail for good: a bounded number of tries, then dead (counted, on the
dashboard, in `gitops-bot outbox list`) until an operator retries or drops them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner, Result
from prometheus_client import REGISTRY
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.app.outbox import REFUSALS_MAX
from bot.config import Settings
from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.store.fire import fire
from bot.store.models import AUDIT, OUTBOX, utcnow
from bot.store.outbox import DROP_EVENT, LEASE, RETRY_EVENT, claim, retry_dead
from gitops_bot.cli import main
from jobs.outbox import dispatch
from sim.gitlab import FaultRule
from tests.cli import database_url
from tests.metrics import database_gauge
from tests.outbox import Harness, harness, together
from tests.pages import Pages

NOTES = "/notes"


@pytest.fixture
def h(db: Engine) -> Iterator[Harness]:
    with harness(db) as wired:
        yield wired


def cli(h: Harness, *args: str) -> Result:
    """`gitops-bot <args>` on the suite's database, the embedded default (no Redis)."""
    env = {"GITOPS_DATABASE_URL": database_url(h.db), "GITOPS_REDIS_URL": None}
    return CliRunner().invoke(main, list(args), env=env)


def dead_rows_gauge(h: Harness) -> float | None:
    """gitops_outbox_dead_rows as the next scrape reads it from the database."""
    return database_gauge(h.db, "gitops_outbox_dead_rows")


def refuse_notes(h: Harness, status: int = 403) -> FaultRule:
    """GitLab refuses every note from now on (until the rule is spent)."""
    return h.double.fail_next(10_000, status, methods="POST", path_endswith=NOTES)


def drain(h: Harness, now: datetime, rounds: int = 100) -> datetime:
    """Dispatches at each moment a row is next due until nothing is due any more; the last
    moment. Bounded: a row tried for ever fails the test instead of hanging it."""
    for _ in range(rounds):
        report = dispatch(now=now)
        live = [r for r in h.unsent() if r["dead_at"] is None and r["dropped_at"] is None]
        if not report.claimed and not [r for r in live if r["next_attempt_at"] <= now]:
            if not live:
                return now
            now = min(r["next_attempt_at"] for r in live)
            continue
        if live:
            now = max(now, min(r["next_attempt_at"] for r in live))
    raise AssertionError(f"rows still tried after {rounds} dispatches")


def note_posts(h: Harness) -> int:
    return h.double.count("POST", path_endswith=NOTES)


def audit(h: Harness, operation_id: str, event: str) -> list[dict[str, object]]:
    query = select(AUDIT).where(AUDIT.c.operation_id == operation_id, AUDIT.c.event == event)
    with h.db.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def dead_note(h: Harness) -> tuple[str, int, int, FaultRule]:
    """A change whose status comment GitLab refuses for good, dispatched until it is dead:
    operation, MR, the dead row's id, and the fault (spend it to let GitLab accept)."""
    rule = refuse_notes(h)
    op_id, iid = h.checking()
    drain(h, utcnow())
    (row,) = h.unsent(op_id)
    assert row["effect"] == "status_comment"
    assert row["dead_at"] is not None
    return op_id, iid, row["id"], rule


def test_a_note_gitlab_refuses_for_good_ends_dead_after_a_bounded_number_of_tries(
    h: Harness,
) -> None:
    """403 on every note: tried REFUSALS_MAX times, then dead with its error, counted, and
    never claimed again (a month later nothing is tried)."""
    before = REGISTRY.get_sample_value("gitops_outbox_dead_total", {"effect": "status_comment"})
    op_id, iid, _, _ = dead_note(h)
    assert note_posts(h) == REFUSALS_MAX
    (row,) = h.unsent(op_id)
    assert row["attempts"] == REFUSALS_MAX
    assert row["last_error"].startswith("dead: Forbidden")
    assert h.gitops_labels(iid) == ["gitops::checking"]  # the labels row went out
    after = REGISTRY.get_sample_value("gitops_outbox_dead_total", {"effect": "status_comment"})
    assert after == (before or 0.0) + 1
    assert dead_rows_gauge(h) == 1
    assert dispatch(now=utcnow() + timedelta(days=30)).claimed == 0
    assert note_posts(h) == REFUSALS_MAX


def test_the_dead_row_is_on_the_dashboard_escaped(h: Harness) -> None:
    """The overview has a banner with the count and a row: id, operation, effect, tries, error."""
    op_id, _, row_id, _ = dead_note(h)
    html = Pages.build(h.db).get("/").get_data(as_text=True)
    assert 'id="outbox-banner"' in html
    assert "1 outbox row failed for good" in html
    section = html[html.index('<section id="outbox">') :]
    section = section[: section.index("</section>")]
    assert f"<td>{row_id}</td>" in section
    assert f'href="/changes/{op_id}"' in section
    assert "<code>status_comment</code>" in section
    assert f"<td>{REFUSALS_MAX}</td>" in section
    assert "dead: Forbidden" in section


def test_an_error_with_markup_is_escaped_on_the_dashboard(h: Harness) -> None:
    """GitLab's words in the last error are text on the page, never markup."""
    _, _, row_id, _ = dead_note(h)
    with h.db.begin() as conn:
        conn.execute(
            OUTBOX.update().where(OUTBOX.c.id == row_id).values(last_error="<script>x</script>")
        )
    html = Pages.build(h.db).get("/").get_data(as_text=True)
    assert "<script>x</script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html


def test_no_banner_without_dead_rows(h: Harness) -> None:
    h.checking()
    dispatch(now=utcnow())
    html = Pages.build(h.db).get("/").get_data(as_text=True)
    assert 'id="outbox-banner"' not in html
    assert "Dead outbox rows <span" in html


def test_outbox_list_shows_the_dead_row(h: Harness) -> None:
    """`outbox list --dead` has the row; `--json` gives scripts the same facts."""
    op_id, _, row_id, _ = dead_note(h)
    result = cli(h, "outbox", "list", "--dead")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith(str(row_id)))
    assert "dead" in line
    assert op_id in line
    assert "status_comment" in line
    assert f"  {REFUSALS_MAX}  " in line
    assert "Forbidden" in line
    assert "1 dead: `gitops-bot outbox retry <id>|--all-dead`" in result.output

    data = json.loads(cli(h, "outbox", "list", "--dead", "--json").output)
    assert [(r["id"], r["status"], r["attempts"]) for r in data] == [(row_id, "dead", REFUSALS_MAX)]
    assert data[0]["last_error"].startswith("dead: Forbidden")


def test_retry_sends_it_once_gitlab_accepts(h: Harness) -> None:
    """GitLab accepts notes again; `outbox retry <id>` makes the row due with its tries reset,
    audited; the next dispatch posts the comment once."""
    op_id, iid, row_id, rule = dead_note(h)
    rule.remaining = 0
    result = cli(h, "outbox", "retry", str(row_id), "--actor", "ops-alice")
    assert result.exit_code == 0, result.output
    assert f"retried: row {row_id} (status_comment of {op_id})" in result.output
    (row,) = h.unsent(op_id)
    assert (row["attempts"], row["dead_at"]) == (0, None)
    (entry,) = audit(h, op_id, RETRY_EVENT)
    assert (entry["actor"], entry["version"]) == ("ops-alice", 0)
    assert f"outbox row {row_id}" in str(entry["detail"])

    report = dispatch(now=utcnow())
    assert report.sent == 1
    assert h.unsent(op_id) == []
    assert len(h.notes(iid)) == 1
    assert dead_rows_gauge(h) == 0
    assert cli(h, "outbox", "list", "--dead").output.strip().startswith("no dead outbox rows")
    page = Pages.build(h.db).get(f"/changes/{op_id}").get_data(as_text=True)
    assert f"outbox row {row_id} (status_comment) retried by the operator" in page
    assert "ops-alice" in page
    shown = cli(h, "show", op_id).output
    assert f"outbox row {row_id} (status_comment) retried by the operator" in shown


def test_retry_all_dead_and_a_row_that_fails_again_dies_again(h: Harness) -> None:
    """`--all-dead` retries every dead row; still refused, it dies again after its tries."""
    op_id, _, row_id, _ = dead_note(h)
    result = cli(h, "outbox", "retry", "--all-dead")
    assert result.exit_code == 0, result.output
    assert f"retried: row {row_id}" in result.output
    drain(h, utcnow())
    (row,) = h.unsent(op_id)
    assert row["dead_at"] is not None
    assert note_posts(h) == 2 * REFUSALS_MAX


def test_drop_leaves_it_never_performed(h: Harness) -> None:
    """`outbox drop <id>`: marked dropped with the operator's name, audited, never sent even
    once GitLab accepts again, and gone from the dead rows and the dashboard's count."""
    op_id, iid, row_id, rule = dead_note(h)
    rule.remaining = 0
    result = cli(h, "outbox", "drop", str(row_id), "--actor", "ops-bob")
    assert result.exit_code == 0, result.output
    assert "never performed; dropped by ops-bob" in result.output
    (row,) = h.unsent(op_id)
    assert row["dropped_by"] == "ops-bob"
    assert row["dropped_at"] is not None
    assert [e["actor"] for e in audit(h, op_id, DROP_EVENT)] == ["ops-bob"]
    assert dispatch(now=utcnow() + timedelta(days=30)).claimed == 0
    assert h.notes(iid) == []
    assert dead_rows_gauge(h) == 0
    assert "outbox-banner" not in Pages.build(h.db).get("/").get_data(as_text=True)
    again = cli(h, "outbox", "retry", str(row_id))
    assert again.exit_code == 1
    assert "dropped by ops-bob" in again.output


def test_retry_or_drop_of_a_row_not_dead_is_refused_and_changes_nothing(h: Harness) -> None:
    """A row still being tried belongs to the dispatcher: neither command touches it."""
    op_id, _ = h.checking()
    rows = h.unsent(op_id)
    for verb in ("retry", "drop"):
        result = cli(h, "outbox", verb, str(rows[0]["id"]))
        assert result.exit_code == 1
        assert "it is not dead" in result.output
    assert cli(h, "outbox", "drop", "999999").exit_code == 1
    assert cli(h, "outbox", "retry").exit_code == 2  # neither ids nor --all-dead
    assert h.unsent(op_id) == rows
    assert audit(h, op_id, RETRY_EVENT) == audit(h, op_id, DROP_EVENT) == []


def test_a_transient_failure_streak_under_the_bound_still_goes_out(h: Harness) -> None:
    """503s on the note one short of GITOPS_OUTBOX_MAX_ATTEMPTS: backed off each time, then
    posted; never dead."""
    bound = Settings().outbox_max_attempts
    h.double.fail_next(bound - 1, 503, methods="POST", path_endswith=NOTES)
    op_id, iid = h.checking()
    drain(h, utcnow())
    assert h.unsent(op_id) == []
    assert len(h.notes(iid)) == 1
    assert note_posts(h) == bound
    assert dead_rows_gauge(h) == 0


def test_transient_failures_past_the_bound_end_dead(db: Engine) -> None:
    """GITOPS_OUTBOX_MAX_ATTEMPTS=3 and GitLab answering 503 for ever: dead after 3 tries."""
    with harness(db, outbox_max_attempts=3) as h:
        h.double.fail_next(10_000, 503, methods="POST", path_endswith=NOTES)
        op_id, _ = h.checking()
        drain(h, utcnow())
        (row,) = h.unsent(op_id)
        assert row["attempts"] == 3
        assert row["dead_at"] is not None
        assert row["last_error"].startswith("dead: ")
        assert note_posts(h) == 3


def test_a_retry_racing_the_dispatcher_does_not_send_twice(h: Harness) -> None:
    """Retried, the row is claimed by one dispatcher; a second retry meanwhile finds nothing
    dead, and a second dispatcher finds nothing due: one note."""
    _, iid, row_id, rule = dead_note(h)
    rule.remaining = 0
    now = utcnow()
    assert [r.id for r in retry_dead(h.db, [row_id], now, "ops", "operator")] == [row_id]
    (taken,) = claim(h.db, 10, now)  # a dispatcher holds it ...
    assert retry_dead(h.db, None, now, "ops", "operator") == []  # ... so it is not dead
    assert dispatch(now=now).claimed == 0  # nor due for another dispatcher
    assert taken.id == row_id
    report = dispatch(now=now + LEASE)  # the holder died: its lease ends, the row goes out once
    assert report.sent == 1
    assert len(h.notes(iid)) == 1
    assert note_posts(h) == REFUSALS_MAX + 1


def race_retries_and_dispatches(h: Harness, op_id: str, iid: int) -> None:
    """Four threads released together, two retrying every dead row and two dispatching, 20
    times each: the operation's note goes out exactly once (one POST past the refused ones)."""

    def work() -> None:
        for _ in range(20):
            retry_dead(h.db, None, utcnow(), "ops", "operator")
            dispatch(now=utcnow())

    together(work, threads=4)
    dispatch(now=utcnow())
    assert h.unsent(op_id) == []
    assert len(h.notes(iid)) == 1
    assert note_posts(h) == REFUSALS_MAX + 1


def test_retries_and_dispatches_released_together_send_once(h: Harness) -> None:
    """Embedded (SQLite serialises the writes); tests/outbox/test_concurrent_pg.py has the same
    race on PostgreSQL."""
    op_id, iid, _, rule = dead_note(h)
    rule.remaining = 0
    race_retries_and_dispatches(h, op_id, iid)


def test_a_newer_row_of_the_same_effect_sent_settles_the_dead_one(h: Harness) -> None:
    """GitLab accepts notes again and the change moves on: its new status-comment row posts the
    current state, and the dead row, moot now, is marked sent with a note (off the dashboard)."""
    op_id, iid, row_id, rule = dead_note(h)
    rule.remaining = 0
    fire(h.db, TransitionRequest(op_id, E.PIPELINE_PASSED))
    report = dispatch(now=utcnow())
    assert report.settled == 1
    assert h.unsent(op_id) == []
    (row,) = [r for r in h.rows(op_id) if r["id"] == row_id]
    assert row["last_error"].startswith("superseded: row ")
    assert len(h.notes(iid)) == 1
    assert note_posts(h) == REFUSALS_MAX + 1
    assert dead_rows_gauge(h) == 0
