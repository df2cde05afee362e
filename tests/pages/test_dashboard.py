"""The dashboard pages through Flask's test client: access, sections, one request, escaping."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from markupsafe import escape
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.hints import hint_for
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.render.status import TimelineEntry
from bot.store.fire import fire
from bot.store.models import utcnow
from bot.store.submit import submit
from tests.builders import make_operation, make_request
from tests.pages import TOKEN, WEBHOOK_SECRET, Pages, set_times
from webhooks.pages import duration, time_in_states

_SECTION = re.compile(r'<section id="(\w+)">(.*?)</section>', re.DOTALL)


def sections(html: str) -> dict[str, str]:
    """The overview's sections by id (failed, pending, in_flight, finished)."""
    return dict(_SECTION.findall(html))


@pytest.fixture
def pages(db: Engine) -> Pages:
    """The app with the API token and a 10-minute "no change" threshold."""
    return Pages.build(db, step_timeout=600)


@pytest.mark.parametrize("path", ["/", "/changes/0b9f6c1e-5d4a-4c8e-9a51-3f2d7e8c9b10"])
def test_without_credentials_both_pages_are_a_401_page(pages: Pages, path: str) -> None:
    """No token: both pages answer 401 with an HTML page and a Bearer challenge, no data."""
    make_operation(pages.engine, S.MERGING, title="Hidden request")
    response = pages.get(path, token=None)
    assert response.status_code == 401
    assert response.mimetype == "text/html"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    body = response.get_data(as_text=True)
    assert "Sign in required" in body
    assert "Hidden request" not in body


def test_wrong_token_is_refused_and_never_echoed(pages: Pages) -> None:
    """A wrong bearer token gets the 401 page, which shows neither token."""
    response = pages.get("/", token="not-the-token")
    assert response.status_code == 401
    assert "not-the-token" not in response.get_data(as_text=True)
    assert TOKEN not in response.get_data(as_text=True)


def test_trusted_proxy_header_lets_in_only_when_configured(db: Engine) -> None:
    """With GITOPS_DASHBOARD_HEADER set its header admits; empty or unconfigured it does not."""
    behind_proxy = Pages.build(db, dashboard_header="X-Forwarded-User")
    assert (
        behind_proxy.get("/", token=None, headers={"X-Forwarded-User": "alice"}).status_code == 200
    )
    assert behind_proxy.get("/", token=None, headers={"X-Forwarded-User": " "}).status_code == 401
    assert behind_proxy.get("/", token=None).status_code == 401
    assert behind_proxy.get("/").status_code == 200  # the token still works

    direct = Pages.build(db)
    assert direct.get("/", token=None, headers={"X-Forwarded-User": "alice"}).status_code == 401


def test_overview_sorts_requests_into_failed_pending_in_flight_and_finished(pages: Pages) -> None:
    """Each request lands in its section with phase words, step name and code, age, MR, hint."""
    db = pages.engine
    moving = make_operation(db, S.MERGING, title="Moving along")
    timed_out = make_operation(db, S.APPROVAL_SENT, title="Approvers silent")
    fire(db, TransitionRequest(timed_out, E.APPROVAL_TIMED_OUT))
    stalled = make_operation(db, S.MR_CREATED, title="Stuck quietly")
    set_times(db, stalled, updated_at=utcnow() - timedelta(hours=2))
    overdue = make_operation(db, S.MERGING, title="Past due")
    set_times(db, overdue, deadline_at=utcnow() - timedelta(minutes=5))
    planned = make_operation(db, S.APPROVAL_SENT, title="Approvers thinking")
    set_times(
        db,
        planned,
        updated_at=utcnow() - timedelta(hours=3),
        deadline_at=utcnow() + timedelta(hours=1),
    )
    make_operation(db, S.HANDLE_FAILED, title="Broke on merge")
    make_operation(db, S.VALIDATED, title="All done")

    html = pages.text("/")
    found = sections(html)

    assert "Moving along" in found["in_flight"]
    assert "Approvers silent" in found["pending"]
    assert "Stuck quietly" in found["pending"]
    assert "No change for 2h" in found["pending"]
    assert "Past due" in found["pending"]
    assert "Past its deadline by 5m" in found["pending"]
    assert "Approvers thinking" in found["in_flight"]  # its deadline is ahead: a planned wait
    assert "Broke on merge" in found["failed"]
    assert "All done" in found["finished"]
    for section in ("failed", "pending", "in_flight", "finished"):
        text = found[section]
        titles = {
            "Moving along",
            "Approvers silent",
            "Stuck quietly",
            "Past due",
            "Approvers thinking",
            "Broke on merge",
            "All done",
        }
        expected = {"failed": 1, "pending": 3, "in_flight": 2, "finished": 1}[section]
        assert sum(title in text for title in titles) == expected
    merging = found["in_flight"]
    assert "Merging" in merging
    assert "approving and merging the merge request" in merging
    assert "HANDLE_STARTED 10101" in merging
    assert 'href="https://gitlab.example.com/platform/config/-/merge_requests/7"' in merging
    assert f'href="/changes/{moving}"' in merging
    assert str(escape(hint_for(S.MERGING, Step.HANDLE_STARTED).text)) in merging
    assert "APPROVAL_PENDING 10503" in found["pending"]
    assert "you can keep waiting" in found["pending"]
    assert "Failed" in found["failed"]
    assert "contact the maintainers" in found["failed"]


def test_detail_shows_phase_step_hint_error_timeline_and_path(pages: Pages) -> None:
    """One failed request: its phase, step, hint, error, each transition and the diagram."""
    db = pages.engine
    op_id = make_operation(db, S.MERGING, title="Bump replicas")
    fire(
        db,
        TransitionRequest(
            op_id,
            E.MERGE_ERROR,
            actor="gitops-bot",
            changes={"error_detail": "GitLab refused the merge: 405 Method Not Allowed"},
        ),
    )

    html = pages.text(f"/changes/{op_id}")

    assert "<h1>Bump replicas</h1>" in html
    assert "Failed" in html
    assert "HANDLE_MERGE_FAILED 10106" in html
    assert str(escape(hint_for(S.HANDLE_FAILED, Step.HANDLE_MERGE_FAILED).text)) in html
    assert "GitLab refused the merge: 405 Method Not Allowed" in html
    assert "<code>MERGING</code> → <code>HANDLE_FAILED</code>" in html
    assert "<code>(new)</code> → <code>APPROVAL_SENDING</code>" in html
    assert html.count("<td><code>merge_error</code></td>") == 1
    assert "gitops-bot" in html
    assert "so far" in html
    diagram = re.search(r'<pre class="mermaid" id="diagram">(.*?)</pre>', html, re.DOTALL)
    assert diagram is not None
    assert diagram.group(1).startswith("stateDiagram-v2")
    assert "MERGING --&gt; HANDLE_FAILED : merge_error" in diagram.group(1)
    assert "class HANDLE_FAILED current" in diagram.group(1)
    assert 'href="https://gitlab.example.com/platform/config/-/merge_requests/7"' in html


def test_detail_shows_the_time_spent_in_each_state(pages: Pages) -> None:
    """Transitions at known times show 30s and 1h 15m spent, and the current state 'so far'."""
    db = pages.engine
    t0 = utcnow() - timedelta(days=1)
    op_id = submit(db, make_request(title="Timed"), now=t0).operation_id
    fire(
        db,
        TransitionRequest(
            op_id,
            E.APPROVAL_SUBMITTED,
            changes={"approval_id": "apr-9"},
            now=t0 + timedelta(seconds=30),
        ),
    )
    fire(db, TransitionRequest(op_id, E.APPROVED, now=t0 + timedelta(seconds=30, minutes=75)))

    html = pages.text(f"/changes/{op_id}")
    cells = re.findall(r"<tr(?: class=\"current\")?>.*?</tr>", html, re.DOTALL)
    rows = [row for row in cells if "<td>" in row]

    assert len(rows) == 3
    assert "<td>30s</td>" in rows[0]
    assert "<td>1h 15m</td>" in rows[1]
    assert "so far" in rows[2]
    assert 'class="current"' in rows[2]


def test_time_in_states_skips_stale_events() -> None:
    """A stale event between two transitions gets no time; the transitions split the span."""
    t0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)

    def entry(minutes: int, to: str, version: int) -> TimelineEntry:
        return TimelineEntry(
            at=t0 + timedelta(minutes=minutes),
            from_state=None,
            to_state=to,
            event="submit",
            step=10001,
            source="api",
            actor=None,
            version=version,
            detail=None,
        )

    spent = time_in_states(
        [entry(0, "MR_CREATING", 1), entry(5, "MR_CREATING", 0), entry(20, "MERGING", 2)],
        t0 + timedelta(minutes=50),
    )

    assert [s.seconds for s in spent] == [1200.0, None, 1800.0]
    assert [s.current for s in spent] == [False, False, True]
    assert [duration(s) for s in (45, 725, 12_000, 183_600)] == ["45s", "12m 5s", "3h 20m", "2d 3h"]


def test_user_text_is_escaped_on_both_pages(pages: Pages) -> None:
    """A <script> title and an HTML requester name are shown as text, never as markup."""
    op_id = make_operation(
        pages.engine,
        S.MERGING,
        title="<script>alert(1)</script>",
        requested_by='<img src=x onerror="alert(2)">',
    )
    for path in ("/", f"/changes/{op_id}"):
        response = pages.get(path)
        html = response.get_data(as_text=True)
        assert "<script>alert(1)" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<img src=x" not in html
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert "script-src" not in response.headers["Content-Security-Policy"]
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in pages.text(f"/changes/{op_id}")


def test_bidi_and_control_characters_never_reach_the_html(pages: Pages) -> None:
    """A title and requester holding U+202E, U+2066 and a carriage return are printed with
    those characters shown as [U+XXXX] on both pages: none reaches the HTML."""
    op = make_operation(
        pages.engine,
        S.MERGING,
        title="Scale \u202eexe.txt\u2069 \u2066rtl\u2069 and\rmore",
        requested_by="mallory\u202e",
    )
    for path in ("/", f"/changes/{op}"):
        body = pages.text(path)
        for hidden in ("\u202e", "\u2066", "\u2069", "\r"):
            assert hidden not in body, (path, hidden)
        assert "[U+202E]exe.txt[U+2069]" in body, path
    assert "mallory[U+202E]" in pages.text(f"/changes/{op}")


def test_unknown_or_malformed_ids_get_the_404_page(pages: Pages) -> None:
    """An id nobody has, and one that is not an id, answer the 404 page (escaped)."""
    missing = pages.get(f"/changes/{uuid.uuid4()}")
    assert missing.status_code == 404
    assert "No such request" in missing.get_data(as_text=True)
    odd = pages.get("/changes/%3Cb%3Ebad%20id")
    assert odd.status_code == 404
    assert "&lt;b&gt;bad id" in odd.get_data(as_text=True)


def test_replaced_request_says_so_and_leaves_the_overview(pages: Pages) -> None:
    """After a re-apply the old request's page says it was replaced; only the new one is listed."""
    db = pages.engine
    old = make_operation(db, S.VALIDATED, subject_id="svc-again", title="First try")
    submit(db, make_request(subject_id="svc-again", title="Second try"))

    assert "A newer request for the same subject and target replaced this one" in pages.text(
        f"/changes/{old}"
    )
    overview = pages.text("/")
    assert "Second try" in overview
    assert "First try" not in overview


def test_secrets_never_reach_a_page(pages: Pages) -> None:
    """Neither the API token nor the webhook secret appears on any page."""
    op_id = make_operation(pages.engine, S.HANDLE_FAILED)
    for path in ("/", f"/changes/{op_id}", "/changes/nope"):
        html = pages.get(path).get_data(as_text=True)
        assert TOKEN not in html
        assert WEBHOOK_SECRET not in html
