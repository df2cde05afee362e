"""POST /api/v1/changes refuses protected paths (CI configuration, CODEOWNERS, ...) with a 422
naming the path, and starts nothing, unless GITOPS_ALLOWED_PATHS names the path itself."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bot.store.models import OPERATIONS
from tests.api import Api, change_body
from tests.builders import count

PROTECTED = [
    ".gitlab-ci.yml",
    ".gitlab/ci/deploy.yml",
    ".gitlab/CODEOWNERS",
    "CODEOWNERS",
    "docs/CODEOWNERS",
    ".gitattributes",
    ".gitops/bot.yml",
    "./.gitlab-ci.yml",
    ".GITLAB-CI.YML",
    ".GitLab/agents/prod/config.yaml",
]


@pytest.mark.parametrize("path", PROTECTED)
@pytest.mark.parametrize("allowed", [(), ("config/",), ("",)], ids=["unset", "config", "empty"])
def test_protected_paths_are_refused_naming_the_path(
    db: Engine, path: str, allowed: tuple[str, ...]
) -> None:
    """With GITOPS_ALLOWED_PATHS unset, broad, or naming other paths, a protected path is a 422
    `protected_path` naming it, and no operation is created."""
    api = Api.build(db, allowed_paths=allowed)
    body = change_body(files=[{"path": path, "content": "x: 1\n"}])
    response = api.submit(body)
    assert response.status_code == 422, response.json
    answer = response.json
    assert answer is not None
    assert answer["error"] == "protected_path"
    assert answer["path"] == path
    assert "protected path" in answer["detail"]
    assert count(db, OPERATIONS) == 0
    assert api.queue.enqueued == []


def test_one_protected_file_among_others_refuses_the_whole_change(db: Engine) -> None:
    """A change of an allowed file and `.gitlab-ci.yml` is refused as a whole."""
    api = Api.build(db, allowed_paths=())
    files = [
        {"path": "config/prod.yaml", "content": "replicas: 3\n"},
        {"path": ".gitlab-ci.yml", "action": "delete"},
    ]
    response = api.submit(change_body(files=files))
    assert response.status_code == 422
    assert response.json is not None
    assert response.json["path"] == ".gitlab-ci.yml"
    assert count(db, OPERATIONS) == 0


@pytest.mark.parametrize(
    ("allowed", "path"),
    [
        ((".gitlab/agents/",), ".gitlab/agents/prod/config.yaml"),
        ((".gitlab-ci.yml",), ".gitlab-ci.yml"),
        (("config/", "docs/CODEOWNERS"), "docs/CODEOWNERS"),
    ],
)
def test_a_protected_path_named_in_the_allowed_paths_is_accepted(
    db: Engine, allowed: tuple[str, ...], path: str
) -> None:
    """An operator who lists the protected path itself (or a folder inside `.gitlab/`) allows
    it: 202."""
    api = Api.build(db, allowed_paths=allowed)
    response = api.submit(change_body(files=[{"path": path, "content": "x: 1\n"}]))
    assert response.status_code == 202, response.json
    assert count(db, OPERATIONS) == 1


def test_a_folder_above_a_protected_path_does_not_allow_it(db: Engine) -> None:
    """`docs/` allows docs/readme.md but not docs/CODEOWNERS; `.gitlab/agents/` not .gitlab/ci."""
    api = Api.build(db, allowed_paths=("docs/", ".gitlab/agents/"))
    ok = api.submit(change_body(files=[{"path": "docs/readme.md", "content": "hi\n"}]))
    assert ok.status_code == 202
    for path in ("docs/CODEOWNERS", ".gitlab/ci/x.yml"):
        refused = api.submit(
            change_body(subject_id=f"s-{path}", files=[{"path": path, "content": "x\n"}])
        )
        assert refused.status_code == 422, path
