"""The API over generated paths: 422 invalid_path exactly where normalise_path refuses."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from sqlalchemy.engine import Engine

from bot.paths import UnsafePath, normalise_path
from tests.api import ALLOWED, Api, change_body
from tests.unit.test_paths import PATHS

_subjects = (f"hyp-{n}" for n in itertools.count())


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(path=PATHS)
def test_api_refuses_exactly_what_normalise_path_refuses(db: Engine, path: str) -> None:
    """The API answers 422 invalid_path for a refused path, accepts the rest, never a 500."""
    api = Api.build(db)
    body = change_body(subject_id=next(_subjects), files=[{"path": path, "content": "x"}])
    response = api.submit(body)
    assert response.json is not None
    try:
        normalise_path(path, ALLOWED)
    except UnsafePath:
        assert response.status_code == 422
        assert response.json["error"] == "invalid_path"
        assert response.json["path"] == path
    else:
        assert response.status_code == 202, response.json
