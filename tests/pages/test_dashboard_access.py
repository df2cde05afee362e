"""Who opens the dashboard with an API client's token, and what the pages print of hostile text."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.store.clients import Scope, create_client, revoke_client
from tests.builders import make_operation
from tests.pages import Pages

PATHS = ["/", "/changes/{op}"]


@pytest.fixture
def pages(db: Engine) -> Pages:
    """The dashboard with the shared token besides the clients the tests create."""
    return Pages.build(db)


def token(pages: Pages, name: str, *scopes: Scope, projects: tuple[str, ...] = ()) -> str:
    """A named client's token."""
    return create_client(pages.engine, name, set(scopes), projects=projects)[1]


@pytest.mark.parametrize("path", PATHS)
def test_a_read_client_opens_the_dashboard(pages: Pages, path: str) -> None:
    """A client with `read` (or admin) sees both pages, and the header names it."""
    op = make_operation(pages.engine, S.MERGING, title="Visible change")
    for scopes in ((Scope.READ,), (Scope.ADMIN,)):
        response = pages.get(path.format(op=op), token=token(pages, f"c-{scopes[0]}", *scopes))
        assert response.status_code == 200
        body = response.get_data(as_text=True)
        assert "Visible change" in body
        assert f"c-{scopes[0]}" in body


@pytest.mark.parametrize("path", PATHS)
def test_a_submit_only_client_no_longer_opens_the_dashboard(pages: Pages, path: str) -> None:
    """A `submit` token gets the 403 page saying it lacks `read`, and no request data."""
    op = make_operation(pages.engine, S.MERGING, title="Hidden change")
    response = pages.get(path.format(op=op), token=token(pages, "ci", Scope.SUBMIT))
    body = response.get_data(as_text=True)
    assert response.status_code == 403
    assert response.mimetype == "text/html"
    assert "lacks the read scope" in body
    assert "Hidden change" not in body


def test_a_client_limited_to_projects_is_sent_to_the_api(pages: Pages) -> None:
    """The dashboard shows every project: a read client limited to one is refused with 403."""
    make_operation(pages.engine, S.MERGING, title="Another team's change", project="team-b/x")
    limited = token(pages, "team-a", Scope.READ, projects=("platform/config",))
    response = pages.get("/", token=limited)
    body = response.get_data(as_text=True)
    assert response.status_code == 403
    assert "GET /api/v1/changes" in body
    assert "Another team" not in body


def test_a_revoked_client_gets_the_sign_in_page(pages: Pages) -> None:
    """Revoked, the token is a 401 like any wrong token."""
    reader = token(pages, "reader", Scope.READ)
    assert pages.get("/", token=reader).status_code == 200
    revoke_client(pages.engine, "reader")
    response = pages.get("/", token=reader)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
