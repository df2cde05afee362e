"""The change's files checked, and its preview fixed, right before its approval is requested
(both flows: approve-first before any MR exists, MR-first once its MR's pipeline passed).

Every file the change writes is checked, never a first few: a request's files come with it
(the API takes at most 100), and a person's MR is read file by file at the approved head, at
most MAX_CHECKED_FILES of them; an MR changing more stops here, saying so, before anyone is asked
to approve it.

Reads: for a person's MR each changed file at the approved head (one each); each changed file's
current content at the target branch, for the diff (at most MAX_READS); each JSON Schema a rule
names, once, at the commit the change's policy was recorded at (`operations.policy_sha`), so a
schema edited on the branch later does not change the checks of a change already in flight (the
target branch's head when no policy was read). A file that fails its validators stops the change
in CREATE_FAILED (CHECKS_FAILED) with file:line:col lines, and nobody is asked to approve it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from bot.app import policy
from bot.app.checks import (
    ChangedFile,
    changed_files,
    check_files,
    describe_problems,
    rules_for,
)
from bot.app.checks.preview import MAX_READS, build_preview
from bot.app.steps import StepContext
from bot.app.steps.common import advance
from bot.core.events import Event
from bot.core.identity import DELETE, ChangeIdentity
from bot.gitlab import Project
from bot.gitlab.compare import read_file
from bot.store.operations import preview_of

#: A file larger than this is not read for the preview (the API takes up to 512 KiB).
MAX_READ_BYTES = 512 * 1024
#: The most files of a person's MR checked before approval: the API's own limit on a change
#: (webhooks/api_models.py MAX_FILES). Each costs one read at the MR's head on top of the one
#: the change identity's content hash costs (and, for the first MAX_READS, one at the target
#: branch for the diff), so a 1,000-file MR would be some 3,000 GitLab calls in one step; past
#: the limit the change stops before approval with the reason, never with files left unchecked.
MAX_CHECKED_FILES = 100


class _Unchecked(Exception):
    """The change's files cannot all be checked; the message says why (the error detail)."""


def _text(content: bytes | None) -> str | None:
    """A file's bytes as text; binary or oversized content as the marker no parser accepts."""
    if content is None:
        return None
    if len(content) > MAX_READ_BYTES:
        return "\x00"
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return "\x00"


def _files(ctx: StepContext, project: Project, identity: ChangeIdentity) -> list[ChangedFile]:
    """The change's files as they will be: the request's, or (a person's MR) each read at its
    approved head. Raises _Unchecked when they cannot all be read."""
    if ctx.op.files:
        return changed_files(ctx.op.files)
    if len(identity.files) > MAX_CHECKED_FILES:
        raise _Unchecked(
            f"the merge request changes {len(identity.files)} files; at most "
            f"{MAX_CHECKED_FILES} are checked before approval: split it into smaller merge "
            "requests"
        )
    head = identity.head_sha or ctx.op.verified_sha or ctx.op.head_sha
    if head is None:
        if not identity.files:
            return []
        raise _Unchecked("the merge request's head commit is not known: its files cannot be read")
    return [
        ChangedFile(f.path, None if f.action == DELETE else _text(read_file(project, f.path, head)))
        for f in identity.files
    ]


def preview_at(project: Project, files: list[ChangedFile], base: str) -> dict[str, Any]:
    """The preview of `files` against their content at `base` (the first MAX_READS of them read,
    one GET each; a file too large or not text is listed without counts)."""
    originals: dict[str, str | None] = {}
    for file in files[:MAX_READS]:
        content = read_file(project, file.path, base)
        if content is None or len(content) <= MAX_READ_BYTES:
            text = _text(content)
            if text != "\x00":
                originals[file.path] = text
    return build_preview(files, originals)


def checked_preview(
    ctx: StepContext, project: Project, identity: ChangeIdentity
) -> dict[str, Any] | None:
    """The change's preview when its files pass their validators; None when they do not (the
    change is stopped: CHECKS_FAILED, its preview and problems recorded)."""
    op = ctx.op
    try:
        files = _files(ctx, project, identity)
    except _Unchecked as exc:
        listed = [ChangedFile(f.path, None if f.action == DELETE else "") for f in identity.files]
        advance(ctx, Event.CHECKS_FAILED, error_detail=str(exc), preview=build_preview(listed, {}))
        return None
    base = op.policy_sha or op.target_branch  # the target's head when the change started
    # the files the bot writes were previewed when it opened their MR (MR first), at the same
    # commit: a commit never changes, so that preview stands and nothing is read again
    stored = preview_of(ctx.services.engine, op.id) if op.files and op.policy_sha else None
    preview = stored or preview_at(project, files, base)

    @cache
    def read_schema(path: str) -> str | None:
        text = _text(read_file(project, path, base))
        return None if text == "\x00" else text

    problems = check_files(files, rules_for(policy.of(op)), read_schema)
    if not problems:
        return preview
    advance(ctx, Event.CHECKS_FAILED, error_detail=describe_problems(problems), preview=preview)
    return None
