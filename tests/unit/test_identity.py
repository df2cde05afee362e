"""The change identity (pure): its digest, its forms, and how an MR is compared with it."""

from __future__ import annotations

import base64
import hashlib

import pytest

from bot.core.identity import (
    ChangedPath,
    ChangeIdentity,
    FileIdentity,
    content_sha256,
    differences,
    identity_from_changes,
    identity_from_request,
)

FILES = [
    {"path": "config/b.yaml", "content": "b: 2\n"},
    {"path": "config/a.yaml", "content": "a: 1\n"},
    {"path": "config/old.yaml", "action": "delete"},
]


def approved() -> ChangeIdentity:
    """The identity of FILES on platform/config main."""
    return identity_from_request("platform/config", "main", FILES)


def test_the_digest_covers_sorted_paths_and_contents() -> None:
    """Order of files does not matter; any content, path or deletion change alters the digest."""
    first = approved()
    assert [f.path for f in first.files] == ["config/a.yaml", "config/b.yaml", "config/old.yaml"]
    assert identity_from_request("platform/config", "main", list(reversed(FILES))) == first
    changed = [dict(FILES[0], content="b: 3\n"), FILES[1], FILES[2]]
    assert identity_from_request("platform/config", "main", changed).digest != first.digest
    undeleted = [*FILES[:2], {"path": "config/old.yaml", "content": ""}]
    assert identity_from_request("platform/config", "main", undeleted).digest != first.digest


def test_base64_content_hashes_its_bytes() -> None:
    """A binary file given as base64 hashes the decoded bytes."""
    data = bytes(range(256))
    assert (
        content_sha256(base64.b64encode(data).decode(), "base64")
        == hashlib.sha256(data).hexdigest()
    )
    with pytest.raises(ValueError, match="base64"):
        content_sha256("not base64!", "base64")


def test_json_round_trip_and_tamper_check() -> None:
    """The stored form reads back equal; a stored digest that does not match is refused."""
    first = approved()
    assert ChangeIdentity.from_json(first.to_json()) == first
    tampered = first.to_json()
    tampered["files"][0]["sha256"] = "0" * 64
    with pytest.raises(ValueError, match="digest"):
        ChangeIdentity.from_json(tampered)


def test_ext_and_summary_name_target_files_and_head() -> None:
    """What the approval request carries and what approvers read."""
    identity = identity_from_changes(
        "platform/config",
        "main",
        [ChangedPath("config/a.yaml", "config/a.yaml"), ChangedPath("x", "x", deleted_file=True)],
        {"config/a.yaml": content_sha256("a: 1\n")},
        head_sha="abc123",
        source_branch="feature",
    )
    assert identity.ext() == {
        "project": "platform/config",
        "target_branch": "main",
        "digest": identity.digest,
        "files": [{"path": "config/a.yaml", "action": "update"}, {"path": "x", "action": "delete"}],
        "head_sha": "abc123",
    }
    summary = identity.summary()
    assert "Target: platform/config branch main" in summary
    assert "- update config/a.yaml" in summary
    assert "- delete x" in summary
    assert "Head commit: abc123" in summary


def test_a_rename_deletes_the_old_path() -> None:
    """A renamed file counts as the old path deleted and the new one written."""
    identity = identity_from_changes(
        "p",
        "main",
        [ChangedPath("old.yaml", "new.yaml", renamed_file=True)],
        {"new.yaml": content_sha256("x\n")},
        head_sha="h",
        source_branch="b",
    )
    assert {f.path: f.action for f in identity.files} == {
        "old.yaml": "delete",
        "new.yaml": "create",
    }


def test_same_changes_and_contents_make_no_difference() -> None:
    """The approved paths with the approved contents (a no-op entry absent from the diff too)."""
    identity = approved()
    contents = {f.path: f.sha256 for f in identity.files}
    changes = [ChangedPath("config/a.yaml", "config/a.yaml", new_file=True)]
    assert differences(identity, target_branch="main", changes=changes, contents=contents) == []
    assert differences(identity, target_branch="main", changes=changes, contents=None) == []


def test_every_kind_of_difference_is_named() -> None:
    """Another target, an extra path, changed content, a deletion undone, a write missing."""
    identity = approved()
    contents = {
        "config/a.yaml": content_sha256("a: 2\n"),
        "config/b.yaml": None,
        "config/old.yaml": content_sha256("still here\n"),
    }
    changes = [
        ChangedPath(".gitlab-ci.yml", ".gitlab-ci.yml"),
        ChangedPath("config/a.yaml", "config/a.yaml"),
    ]
    found = differences(identity, target_branch="release", changes=changes, contents=contents)
    assert found == [
        "the target branch is now release, not main",
        ".gitlab-ci.yml changed, and the approved change does not touch it",
        "config/a.yaml differs from the approved content",
        "config/b.yaml is missing, and the approved change writes it",
        "config/old.yaml exists, and the approved change deletes it",
    ]


def test_an_identity_refuses_inconsistent_files() -> None:
    """A path listed twice, or a deletion with a hash, is not an identity."""
    with pytest.raises(ValueError, match="twice"):
        ChangeIdentity(
            "p", "main", (FileIdentity("a", "write", "1"), FileIdentity("a", "write", "2"))
        )
    with pytest.raises(ValueError, match="deletion"):
        ChangeIdentity("p", "main", (FileIdentity("a", "delete", "1"),))
