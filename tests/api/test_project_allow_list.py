"""POST /api/v1/changes with GITOPS_PROJECTS set: an allow-list of the projects the bot manages."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bot.core.managed import is_managed
from bot.store.models import AUDIT, OPERATIONS
from tests.api import Api, change_body
from tests.builders import count


def test_a_project_not_listed_is_403_and_nothing_is_stored(db: Engine) -> None:
    """A request for a project GITOPS_PROJECTS does not list is refused 403, nothing recorded
    and nothing enqueued."""
    api = Api.build(db, projects=("platform/config",))
    response = api.submit(
        change_body(project="other/repo"), headers={"Idempotency-Key": "k-unmanaged"}
    )
    assert response.status_code == 403
    assert response.json is not None
    assert response.json["error"] == "project_not_managed"
    assert response.json["project"] == "other/repo"
    assert "GITOPS_PROJECTS" in response.json["detail"]
    assert (count(db, OPERATIONS), count(db, AUDIT)) == (0, 0)
    assert api.queue.enqueued == []


@pytest.mark.parametrize("listed", ["Platform/Config", "platform/config/", " platform/config"])
def test_a_listed_project_is_accepted_whatever_the_case(db: Engine, listed: str) -> None:
    """Paths on the allow-list are compared case-insensitively (GitLab resolves them so)."""
    api = Api.build(db, projects=("other/repo", listed))
    response = api.submit(change_body(project="platform/config"))
    assert response.status_code == 202, response.json
    assert count(db, OPERATIONS) == 1


def test_without_an_allow_list_every_project_is_accepted(db: Engine) -> None:
    """GITOPS_PROJECTS unset: a request for any project is accepted, as before."""
    api = Api.build(db)
    response = api.submit(change_body(project="any/where"))
    assert response.status_code == 202, response.json


def test_a_numeric_entry_matches_the_project_id() -> None:
    """An entry may be a numeric project id; a path never matches an id it is not."""
    assert is_managed(("42",), project_id=42, path="platform/config")
    assert is_managed(("platform/config",), project_id=7, path="PLATFORM/config")
    assert not is_managed(("42",), project_id=7, path="platform/config")
    assert not is_managed(("platform/config",), project_id=42, path="platform/config-2")
    assert is_managed((), project_id=1, path="x/y")
