"""The change identity: what an approval approves, and how a merge request is checked against it.

Pure: no IO. The identity is the project, the target branch, and the sorted list of the change's
paths each with the SHA-256 of its content after the change (None: the path is deleted); MR-first
adds the head SHA the approval was requested for. Its digest is the SHA-256 of that list in
canonical JSON. The bot never approves or merges a merge request whose changes differ from it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The action shown for a path whose content the change writes, when create or update is unknown.
WRITE = "write"
DELETE = "delete"
_ACTIONS = frozenset({WRITE, DELETE, "create", "update"})


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """One path of a change: how it changes, and the SHA-256 of its content afterwards."""

    path: str
    action: str
    #: hex SHA-256 of the file's bytes after the change; None when the change deletes it
    sha256: str | None


@dataclass(frozen=True, slots=True)
class ChangedPath:
    """One entry of a merge request's changes as GitLab lists them (compare or diffs)."""

    old_path: str
    new_path: str
    new_file: bool = False
    deleted_file: bool = False
    renamed_file: bool = False

    @property
    def paths(self) -> set[str]:
        """Every path this entry touches (both sides of a rename)."""
        return {self.old_path, self.new_path} - {""}

    @property
    def action(self) -> str:
        """create, update or delete for the new path (a rename creates it)."""
        if self.deleted_file:
            return DELETE
        return "create" if self.new_file or self.renamed_file else "update"


def content_sha256(content: str, encoding: str | None = None) -> str:
    """The SHA-256 of a file's bytes as a change request gives them (text, or base64)."""
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("content is not valid base64") from exc
    else:
        data = content.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class ChangeIdentity:
    """What one approval approves."""

    project: str
    target_branch: str
    files: tuple[FileIdentity, ...]
    #: MR-first: the MR head the approval was requested for
    head_sha: str | None = None
    #: the MR's source branch when the identity was taken (None: not yet known)
    source_branch: str | None = None
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.files, key=lambda f: f.path))
        paths = [f.path for f in ordered]
        if len(set(paths)) != len(paths):
            raise ValueError("a change identity lists a path twice")
        for f in ordered:
            if f.action not in _ACTIONS:
                raise ValueError(f"unknown action {f.action!r} for {f.path}")
            if (f.action == DELETE) != (f.sha256 is None):
                raise ValueError(f"{f.path}: a deletion has no content hash, a write has one")
        object.__setattr__(self, "files", ordered)
        canonical = json.dumps([[f.path, f.sha256] for f in ordered], separators=(",", ":"))
        object.__setattr__(self, "digest", hashlib.sha256(canonical.encode()).hexdigest())

    @property
    def by_path(self) -> dict[str, FileIdentity]:
        """The files by path."""
        return {f.path: f for f in self.files}

    def ext(self) -> dict[str, Any]:
        """`ext.change` of the approval request (docs/approval-protocol.md)."""
        out: dict[str, Any] = {
            "project": self.project,
            "target_branch": self.target_branch,
            "digest": self.digest,
            "files": [{"path": f.path, "action": f.action} for f in self.files],
        }
        if self.head_sha:
            out["head_sha"] = self.head_sha
        return out

    def summary(self) -> str:
        """What approvers read: the target, every file (never a first few: what an approval
        approves is all of them) and (MR-first) the head, as plain lines."""
        lines = [
            f"Target: {self.project} branch {self.target_branch}",
            f"Files ({len(self.files)}, every one listed):",
            *(f"- {f.action} {f.path}" for f in self.files),
        ]
        if self.head_sha:
            lines.append(f"Head commit: {self.head_sha}")
        lines.append(f"Change digest: sha256:{self.digest}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The form stored on the operation (operations.change_identity)."""
        return {
            "project": self.project,
            "target_branch": self.target_branch,
            "files": [{"path": f.path, "action": f.action, "sha256": f.sha256} for f in self.files],
            "head_sha": self.head_sha,
            "source_branch": self.source_branch,
            "digest": self.digest,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChangeIdentity:
        """The identity stored by to_json(); its digest is recomputed and must match."""
        identity = cls(
            project=str(data["project"]),
            target_branch=str(data["target_branch"]),
            files=tuple(
                FileIdentity(str(f["path"]), str(f["action"]), f.get("sha256"))
                for f in data["files"]
            ),
            head_sha=data.get("head_sha"),
            source_branch=data.get("source_branch"),
        )
        stored = data.get("digest")
        if stored is not None and stored != identity.digest:
            raise ValueError("the stored change identity does not match its digest")
        return identity


def identity_from_request(
    project: str, target_branch: str, files: Sequence[Mapping[str, str]]
) -> ChangeIdentity:
    """The identity of a change the bot will write itself (REST API, revert): from its files."""
    out: list[FileIdentity] = []
    for spec in files:
        path = spec["path"]
        if spec.get("action") == DELETE:
            out.append(FileIdentity(path, DELETE, None))
        else:
            digest = content_sha256(spec["content"], spec.get("encoding"))
            out.append(FileIdentity(path, WRITE, digest))
    return ChangeIdentity(project, target_branch, tuple(out))


def identity_from_changes(
    project: str,
    target_branch: str,
    changes: Iterable[ChangedPath],
    contents: Mapping[str, str | None],
    *,
    head_sha: str,
    source_branch: str,
) -> ChangeIdentity:
    """The identity of a merge request's changes (MR-first): paths and their content at head."""
    files: dict[str, FileIdentity] = {}
    for change in changes:
        if change.renamed_file and change.old_path and change.old_path != change.new_path:
            files[change.old_path] = FileIdentity(change.old_path, DELETE, None)
        path = change.new_path or change.old_path
        digest = contents.get(path)
        if change.deleted_file or digest is None:
            files[path] = FileIdentity(path, DELETE, None)
        else:
            files[path] = FileIdentity(path, change.action, digest)
    return ChangeIdentity(
        project,
        target_branch,
        tuple(files.values()),
        head_sha=head_sha,
        source_branch=source_branch,
    )


def differences(
    identity: ChangeIdentity,
    *,
    target_branch: str,
    changes: Iterable[ChangedPath],
    contents: Mapping[str, str | None] | None,
    source_branch: str | None = None,
) -> list[str]:
    """How a merge request now differs from the approved identity (empty: it does not).

    `changes` are the paths GitLab lists between the target and the MR's head; `contents` the
    SHA-256 of each approved path at that head (None for a missing file), or None when that head
    was checked before (a commit's content never changes, so only the list can differ then).
    """
    found: list[str] = []
    if target_branch != identity.target_branch:
        found.append(f"the target branch is now {target_branch}, not {identity.target_branch}")
    if (
        source_branch is not None
        and identity.source_branch is not None
        and source_branch != identity.source_branch
    ):
        found.append(f"the source branch is now {source_branch}, not {identity.source_branch}")
    approved = identity.by_path
    touched: set[str] = set()
    for change in changes:
        touched |= change.paths
    for path in sorted(touched - set(approved)):
        found.append(f"{path} changed, and the approved change does not touch it")
    if contents is not None:
        for path, file in sorted(approved.items()):
            now = contents.get(path)
            if now == file.sha256:
                continue
            if file.sha256 is None:
                found.append(f"{path} exists, and the approved change deletes it")
            elif now is None:
                found.append(f"{path} is missing, and the approved change writes it")
            else:
                found.append(f"{path} differs from the approved content")
    return found
