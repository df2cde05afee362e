"""The API over generated paths: 422 invalid_path exactly where normalise_path refuses.

Two sources of paths: hypothesis (tests/unit/test_paths.py's PATHS, shrinking on failure) and
10,000 seeded hostile and valid paths (`generated_paths`), each in its own POST /api/v1/changes.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.paths import UnsafePath, normalise_path
from bot.store.models import OPERATIONS
from tests.api import ALLOWED, Api, change_body
from tests.unit.test_paths import PATHS, expected_form, generated_paths, safely_inside

log = logging.getLogger(__name__)
_subjects = (f"hyp-{n}" for n in itertools.count())

#: How many generated paths go through the API: the hardening issue's 10,000 on the embedded
#: pass; the PostgreSQL pass, where each accepted path is a slower insert, runs 2,000 more.
GENERATED = 2_000 if os.environ.get("GITOPS_TEST_DATABASE_URL") else 10_000


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


def _refusable(path: str) -> bool:
    try:
        normalise_path(path, ALLOWED)
    except UnsafePath:
        return True
    return False


def test_ten_thousand_generated_paths_none_accepted_outside_the_allowed_prefixes(
    db: Engine,
) -> None:
    """10,000 paths on the embedded pass, 2,000 on PostgreSQL (traversal, absolute, backslashes,
    URL encoding, look-alikes, NUL, .git, prefix confusion, length limits, valid ones) through
    POST /api/v1/changes: what the bot
    stored for each accepted one is safely inside config/ or deploy/values.yaml and in canonical
    form; every other one is a 422 invalid_path naming it; nothing else (no 5xx)."""
    api = Api.build(db)
    answers: Counter[int] = Counter()
    accepted: dict[str, str] = {}  # operation id -> the path as sent
    wrong: list[tuple[str, int, Any]] = []
    for n, path in enumerate(generated_paths(GENERATED)):
        body = change_body(subject_id=f"gen-{n}", files=[{"path": path, "content": "x"}])
        response = api.submit(body)
        answers[response.status_code] += 1
        answer = response.json
        assert answer is not None
        if response.status_code == 202:
            accepted[answer["operation_id"]] = path
        elif (response.status_code, answer.get("error"), answer.get("path")) != (
            422,
            "invalid_path",
            path,
        ) or not _refusable(path):
            wrong.append((path, response.status_code, answer))
    with db.connect() as conn:
        rows = conn.execute(select(OPERATIONS.c.id, OPERATIONS.c.files))
        stored = {row.id: row.files for row in rows}
    outside = [
        (accepted[op_id], files)
        for op_id, files in stored.items()
        if op_id in accepted
        and not (
            len(files) == 1
            and safely_inside(files[0]["path"], ALLOWED)
            and files[0]["path"] == expected_form(accepted[op_id])
        )
    ]
    # the figures (pytest --log-cli-level=INFO shows them)
    log.info(
        "%d generated paths through the API: %d accepted (202), %d refused (422 invalid_path), "
        "%d accepted outside the allowed prefixes, %d other answers",
        GENERATED,
        len(accepted),
        answers[422],
        len(outside),
        sum(n for status, n in answers.items() if status not in (202, 422)),
    )
    assert sum(answers.values()) == GENERATED
    assert set(answers) <= {202, 422}, answers
    assert wrong == []
    assert set(stored) >= set(accepted)  # every 202 is an operation the bot will carry out
    assert outside == []
    assert len(accepted) >= GENERATED // 5  # the valid side is exercised too (2,679 of 10,000)
    assert len(accepted) == sum(not _refusable(p) for p in accepted.values())
