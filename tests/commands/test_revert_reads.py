"""The reads behind `/gitops revert` against a mocked GitLab: what each file goes back to."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import fields, replace
from typing import Any

import pytest
import responses
from responses import matchers

from bot.app.commands.revert_files import undo_files
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from bot.errors import CannotProceed
from bot.store.operations import OperationRow
from tests.adapters.test_gitlab_harness import P, account, mock_gitlab

MERGE, BEFORE, BASE, HEAD = "m" * 40, "b" * 40, "c" * 40, "d" * 40
MR = f"{P}/merge_requests/7"

#: Fields the revert reads do not look at: None when the row has them (the row grows over time).
_UNUSED = {"change_identity": None, "verified_sha": None}
ORIGINAL = OperationRow(
    **{k: v for k, v in _UNUSED.items() if k in {f.name for f in fields(OperationRow)}},
    id="op-1",
    state=S.VALIDATED,
    owner=True,
    flow=Flow.MR_FIRST,
    step=Step.CALLBACK_VALIDATED,
    version=8,
    kind="change",
    project="platform/config",
    project_id=42,
    target_branch="main",
    title="Scale",
    description="",
    files=[],
    requested_by="alice",
    mr_iid=7,
    mr_url=None,
    mr_opened_by_bot=False,
    branch="feature",
    head_sha=HEAD,
    merge_commit_sha=MERGE,
    approval_id="apr-1",
    approved=True,
    attempts=0,
    deadline_at=None,
    progress={},
)


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


def add_file(rsps: responses.RequestsMock, path: str, ref: str, content: bytes | None) -> None:
    """GitLab's answer to reading `path` at `ref` (404 when `content` is None)."""
    url = f"{P}/repository/files/{path.replace('/', '%2F')}"
    match = [matchers.query_param_matcher({"ref": ref})]
    if content is None:
        rsps.add(
            responses.GET, url, status=404, json={"message": "404 File Not Found"}, match=match
        )
        return
    body: dict[str, Any] = {
        "file_name": path.rsplit("/", 1)[-1],
        "file_path": path,
        "ref": ref,
        "encoding": "base64",
        "content": base64.b64encode(content).decode(),
        "blob_id": "x",
        "commit_id": "y",
        "last_commit_id": "z",
    }
    rsps.add(responses.GET, url, json=body, match=match)


def add_commit(rsps: responses.RequestsMock, sha: str, parents: list[str]) -> None:
    """GitLab's answer for one commit."""
    rsps.add(
        responses.GET, f"{P}/repository/commits/{sha}", json={"id": sha, "parent_ids": parents}
    )


def test_an_applied_mr_on_older_gitlab_is_read_from_changes(rsps: responses.RequestsMock) -> None:
    """Without `.../diffs` (404) the MR's `.../changes` names the paths; each goes back to its
    content before the merge (first parent), a new one is deleted, a renamed one restored."""
    add_commit(rsps, MERGE, [BEFORE, HEAD])
    rsps.add(responses.GET, f"{MR}/diffs", status=404, json={"message": "404 Not Found"})
    changes = [
        {"old_path": "config/prod.yaml", "new_path": "config/prod.yaml"},
        {"old_path": "config/new.yaml", "new_path": "config/new.yaml", "new_file": True},
        {"old_path": "old/name.yaml", "new_path": "new/name.yaml", "renamed_file": True},
    ]
    rsps.add(responses.GET, f"{MR}/changes", json={"changes": changes})
    for path, before, after in [
        ("config/prod.yaml", b"replicas: 1\n", b"replicas: 3\n"),
        ("config/new.yaml", None, b"on: true\n"),
        ("old/name.yaml", b"a: 1\n", None),
        ("new/name.yaml", None, b"a: 1\n"),
    ]:
        add_file(rsps, path, MERGE, after)
        add_file(rsps, path, "main", after)
        add_file(rsps, path, BEFORE, before)

    files = undo_files(account().project(42), ORIGINAL)

    assert files == [
        {"path": "config/prod.yaml", "content": "replicas: 1\n"},
        {"path": "config/new.yaml", "action": "delete"},
        {"path": "old/name.yaml", "content": "a: 1\n"},
        {"path": "new/name.yaml", "action": "delete"},
    ]


def test_a_fast_forward_merge_restores_from_the_mr_base(rsps: responses.RequestsMock) -> None:
    """A merged head with one parent (fast-forward) restores from the MR's diff base."""
    add_commit(rsps, MERGE, [HEAD])
    rsps.add(responses.GET, MR, json={"iid": 7, "diff_refs": {"base_sha": BASE}})
    binary = bytes(range(256))
    add_file(rsps, "bin/blob", MERGE, b"new")
    add_file(rsps, "bin/blob", "main", b"new")
    add_file(rsps, "bin/blob", BASE, binary)
    op = replace(ORIGINAL, files=[{"path": "bin/blob", "content": "new"}])

    files = undo_files(account().project(42), op)

    assert files == [
        {"path": "bin/blob", "content": base64.b64encode(binary).decode(), "encoding": "base64"}
    ]


def test_a_change_that_changed_nothing_is_not_reverted(rsps: responses.RequestsMock) -> None:
    """When every file is the same before and after the merge there is nothing to undo."""
    add_commit(rsps, MERGE, [BEFORE, HEAD])
    for ref in (MERGE, "main", BEFORE):
        add_file(rsps, "config/prod.yaml", ref, b"same\n")
    op = replace(ORIGINAL, files=[{"path": "config/prod.yaml", "content": "same\n"}])

    with pytest.raises(CannotProceed, match="changed none of the files"):
        undo_files(account().project(42), op)


def test_an_unknown_merge_commit_is_refused(rsps: responses.RequestsMock) -> None:
    """Without a merge commit (and an MR that does not say one) nothing can be restored."""
    rsps.add(responses.GET, MR, json={"iid": 7, "state": "merged"})
    op = replace(ORIGINAL, merge_commit_sha=None)

    with pytest.raises(CannotProceed, match="merge commit"):
        undo_files(account().project(42), op)


def test_too_many_files_are_refused_before_reading_them(rsps: responses.RequestsMock) -> None:
    """A change of more than MAX_REVERT_FILES paths is refused without reading any file."""
    files = [{"path": f"f/{n}", "content": "x"} for n in range(51)]
    op = replace(ORIGINAL, files=files)

    with pytest.raises(CannotProceed, match="more than 50 files"):
        undo_files(account().project(42), op)
    assert len(rsps.calls) == 0
