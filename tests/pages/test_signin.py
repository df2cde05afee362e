"""Signing in to the dashboard with GitLab (OAuth authorization code with PKCE) against the
GitLab double: who gets in, and the attacks on the flow (a wrong state, a sign-in started in
another browser, a replayed code, a forged session)."""

from __future__ import annotations

from collections.abc import Iterator
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from flask.testing import FlaskClient
from sqlalchemy.engine import Engine
from werkzeug.test import TestResponse

from bot.approval import ApprovalClient
from bot.config import Settings
from bot.core.states import BindingState as S
from bot.gitlab import Account, ApproveComponent, make_client
from bot.services import Clients, Services
from sim.gitlab import GitLabDouble
from tests.api import FakeQueue
from tests.builders import make_operation
from webhooks import create_app
from webhooks.session import SESSION_COOKIE

GITLAB = "https://gitlab.example.com"
PUBLIC = "http://bot.test"
AUTHOR_TOKEN = "author-token-abcdef"
PROJECT = "platform/config"
APP_ID, APP_SECRET = "dashboard-app", "dashboard-app-secret"


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """GitLab with the managed project, the bot's author, the OAuth application, and people:
    alice (named in GITOPS_DASHBOARD_USERS), carol (Reporter), gus (Guest), bob (stranger)."""
    gitlab = GitLabDouble(GITLAB)
    gitlab.add_project(PROJECT)
    gitlab.add_user("gitops-bot", token=AUTHOR_TOKEN, access={PROJECT: 40})
    gitlab.add_user("alice")
    gitlab.add_user("carol", access={PROJECT: 20})
    gitlab.add_user("gus", access={PROJECT: 10})
    gitlab.add_user("bob")
    gitlab.add_oauth_app(APP_ID, APP_SECRET, f"{PUBLIC}/auth/callback")
    with gitlab.mocked(GITLAB):
        yield gitlab


def dashboard(db: Engine, **settings: Any) -> FlaskClient:
    """The web app with GitLab sign-in set up (settings overridable), its author on the double."""
    values: dict[str, Any] = {
        "database_url": str(db.url),
        "public_url": PUBLIC,
        "gitlab_url": GITLAB,
        "gitlab_token": AUTHOR_TOKEN,
        "projects": (PROJECT,),
        "dashboard_users": ("alice",),
        "oauth_client_id": APP_ID,
        "oauth_client_secret": APP_SECRET,
    }
    values.update(settings)
    clients = Clients(
        author=Account(make_client(GITLAB, AUTHOR_TOKEN)),
        approvers=[],
        approve=ApproveComponent(),
        approval=ApprovalClient("https://approvals.example.com"),
    )
    services = Services(Settings(**values), db, FakeQueue(), clients=clients)
    app = create_app(services)
    app.testing = True
    return app.test_client()


def at_gitlab(double: GitLabDouble, who: str | None, login: TestResponse) -> str:
    """The browser at GitLab's authorize page as `who`: where GitLab sends it back (path and
    query on the bot)."""
    assert login.status_code == 302
    double.oauth_sign_in(who)
    answer = requests.get(login.headers["Location"], allow_redirects=False, timeout=5)
    assert answer.status_code == 302
    back = answer.headers["Location"]
    assert back.startswith(f"{PUBLIC}/auth/callback?")
    return back.removeprefix(PUBLIC)


def sign_in(browser: FlaskClient, double: GitLabDouble, who: str) -> TestResponse:
    """The whole round: login, GitLab, callback."""
    return browser.get(at_gitlab(double, who, browser.get("/auth/login")))


def session_set(response: TestResponse) -> SimpleCookie:
    """The cookies the response sets."""
    jar: SimpleCookie = SimpleCookie()
    for header in response.headers.getlist("Set-Cookie"):
        jar.load(header)
    return jar


def test_a_user_named_in_dashboard_users_signs_in_and_out(db: Engine, double: GitLabDouble) -> None:
    """alice signs in: 303 to the dashboard with an HttpOnly, SameSite=Lax session cookie; the
    dashboard opens without a token and names her; signing out ends it."""
    make_operation(db, S.MERGING, title="Seen by alice")
    browser = dashboard(db)

    done = sign_in(browser, double, "alice")

    assert (done.status_code, done.headers["Location"]) == (303, "/")
    cookie = session_set(done)[SESSION_COOKIE]
    assert cookie["httponly"]
    assert cookie["samesite"] == "Lax"
    assert not cookie["secure"]
    page = browser.get("/")
    assert page.status_code == 200
    assert "Seen by alice" in page.get_data(as_text=True)
    assert 'action="/auth/logout"' in page.get_data(as_text=True)
    # the user's token read who she is, and nothing else
    assert [(c.method, c.path) for c in double.calls if c.user == "alice"] == [("GET", "/user")]

    out = browser.post("/auth/logout")
    assert out.status_code == 200
    assert session_set(out)[SESSION_COOKIE].value == ""
    assert browser.get("/").status_code == 401


def test_a_reporter_of_a_managed_project_signs_in(db: Engine, double: GitLabDouble) -> None:
    """carol, Reporter in a GITOPS_PROJECTS project, is let in; her membership is read with the
    bot's author token."""
    browser = dashboard(db)
    assert sign_in(browser, double, "carol").status_code == 303
    assert browser.get("/").status_code == 200
    carol = double.user("carol").id
    assert double.count("GET", f"/projects/{PROJECT}/members/all/{carol}") == 1
    assert double.calls_matching("GET", "/members/all/")[0].user == "gitops-bot"


@pytest.mark.parametrize("who", ["gus", "bob"])
def test_a_user_not_allowed_is_refused_without_a_session(
    db: Engine, double: GitLabDouble, who: str
) -> None:
    """A Guest or a stranger gets the 403 page naming them, no session cookie, and the
    dashboard stays closed."""
    browser = dashboard(db)
    refused = sign_in(browser, double, who)
    assert refused.status_code == 403
    assert f"{who} may not see this dashboard" in refused.get_data(as_text=True)
    assert SESSION_COOKIE not in session_set(refused)
    assert browser.get("/").status_code == 401


def test_a_wrong_state_is_refused_before_the_code_is_used(db: Engine, double: GitLabDouble) -> None:
    """A callback whose state is not the sign-in's is refused 400: no token is asked for, no
    session is set."""
    browser = dashboard(db)
    back = at_gitlab(double, "alice", browser.get("/auth/login"))
    query = parse_qs(urlsplit(back).query)
    forged = f"/auth/callback?code={query['code'][0]}&state=attacker-state"

    refused = browser.get(forged)

    assert refused.status_code == 400
    assert "state" in refused.get_data(as_text=True)
    assert double.oauth_tokens_issued() == 0
    assert SESSION_COOKIE not in session_set(refused)
    assert browser.get("/").status_code == 401


def test_a_callback_from_a_sign_in_started_elsewhere_is_refused(
    db: Engine, double: GitLabDouble
) -> None:
    """The attacker's own code and state, sent to a victim's browser (login CSRF): the victim
    started no sign-in, so it is refused and nothing is exchanged."""
    attacker = dashboard(db)
    back = at_gitlab(double, "bob", attacker.get("/auth/login"))
    victim = dashboard(db)
    refused = victim.get(back)
    assert refused.status_code == 400
    assert double.oauth_tokens_issued() == 0
    assert victim.get("/").status_code == 401


def test_a_replayed_code_is_refused(db: Engine, double: GitLabDouble) -> None:
    """A code already traded is good for nothing: replayed in the same browser (its sign-in is
    over) or under a fresh sign-in's state (GitLab refuses it), no session is set."""
    browser = dashboard(db)
    back = at_gitlab(double, "alice", browser.get("/auth/login"))
    assert browser.get(back).status_code == 303
    code = parse_qs(urlsplit(back).query)["code"][0]

    again = dashboard(db)
    assert again.get(back).status_code == 400  # no sign-in started in this browser
    fresh = again.get("/auth/login")
    state = parse_qs(urlsplit(fresh.headers["Location"]).query)["state"][0]
    replayed = again.get(f"/auth/callback?code={code}&state={state}")

    assert replayed.status_code == 401
    assert "GitLab refused the sign-in (invalid_grant)" in replayed.get_data(as_text=True)
    assert SESSION_COOKIE not in session_set(replayed)
    assert double.oauth_tokens_issued() == 1
    assert again.get("/").status_code == 401


def test_a_session_is_signed_with_a_key_from_the_client_secret(
    db: Engine, double: GitLabDouble
) -> None:
    """Another web instance with the same secret takes the session; one with another secret,
    or a session altered by a byte, does not."""
    browser = dashboard(db)
    value = session_set(sign_in(browser, double, "alice"))[SESSION_COOKIE].value

    def opens(client: FlaskClient, cookie: str) -> int:
        client.set_cookie(SESSION_COOKIE, cookie)
        return client.get("/").status_code

    assert opens(dashboard(db), value) == 200
    assert opens(dashboard(db, oauth_client_secret="another-secret"), value) == 401
    forged = value[:-2] + ("AA" if not value.endswith("AA") else "BB")
    assert opens(dashboard(db), forged) == 401
    payload, at, mac = value.split(".")
    assert opens(dashboard(db), f"{payload}.{int(at) + 1}.{mac}") == 401


def test_the_session_cookie_is_secure_behind_https(db: Engine, double: GitLabDouble) -> None:
    """With an https public URL both cookies carry Secure."""
    double.add_oauth_app("https-app", APP_SECRET, "https://bot.example/auth/callback")
    browser = dashboard(db, public_url="https://bot.example", oauth_client_id="https-app")
    login = browser.get("/auth/login", base_url="https://bot.example")
    assert session_set(login)["gitops_signin"]["secure"]
    double.oauth_sign_in("alice")
    back = requests.get(login.headers["Location"], allow_redirects=False, timeout=5)
    done = browser.get(
        back.headers["Location"].removeprefix("https://bot.example"),
        base_url="https://bot.example",
    )
    assert done.status_code == 303
    assert session_set(done)[SESSION_COOKIE]["secure"]


def test_gitlab_failing_is_a_502_page_not_a_session(db: Engine, double: GitLabDouble) -> None:
    """GitLab answering 500 to GET /user ends the sign-in with a 502 page."""
    browser = dashboard(db)
    back = at_gitlab(double, "alice", browser.get("/auth/login"))
    double.fail_next(1, 500, path_endswith="/user")
    failed = browser.get(back)
    assert failed.status_code == 502
    assert SESSION_COOKIE not in session_set(failed)


def test_without_oauth_settings_there_is_no_gitlab_sign_in(db: Engine) -> None:
    """Unset, the routes answer 404 and the 401 page offers no GitLab link; set, it does."""
    unset = dashboard(db, oauth_client_id="", oauth_client_secret="")
    assert unset.get("/auth/login").status_code == 404
    assert unset.get("/auth/callback?code=x&state=y").status_code == 404
    assert "/auth/login" not in unset.get("/").get_data(as_text=True)
    assert 'href="/auth/login"' in dashboard(db).get("/").get_data(as_text=True)


def test_the_login_asks_for_read_user_with_pkce(db: Engine) -> None:
    """The authorize URL names the app, the callback, `read_user`, a state and an S256
    challenge."""
    login = dashboard(db).get("/auth/login")
    url = urlsplit(login.headers["Location"])
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{GITLAB}/oauth/authorize"
    assert query["client_id"] == APP_ID
    assert query["redirect_uri"] == f"{PUBLIC}/auth/callback"
    assert (query["scope"], query["response_type"]) == ("read_user", "code")
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43
    assert len(query["state"]) >= 32
