"""The REST API's request bodies: parsing with limits, validation, idempotency keys.

Everything here is synchronous and cheap; a refusal is an ApiError with the right 4xx.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, NoReturn

from flask import request

from bot.core.path_policy import refused_paths
from bot.core.paths import UnsafePath, normalise_path
from webhooks.ingest import read_body

MAX_ID_LENGTH = 255
#: subject_id, target_key, project, target_branch, requested_by: no spaces, quotes or controls.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/@:+!=~-]*$"
MAX_TITLE_LENGTH = 255
MAX_DESCRIPTION_BYTES = 64 * 1024
MAX_FILES = 100
MAX_FILE_BYTES = 512 * 1024
#: A request body is 3 deep (object, files, file); anything much deeper is not ours.
MAX_JSON_DEPTH = 8
MAX_IDEMPOTENCY_KEY_LENGTH = 255
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]+$"
DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 500
#: Seconds a client is asked to wait after a 503 "overloaded".
RETRY_AFTER_SECONDS = 60

_ID = re.compile(ID_PATTERN)
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
OPERATION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
LIMIT_PATTERN = re.compile(r"^[0-9]{1,6}$")
_REQUIRED = (
    "subject_id",
    "target_key",
    "project",
    "target_branch",
    "title",
    "files",
    "requested_by",
)
_FIELDS = frozenset({*_REQUIRED, "description"})
_ID_FIELDS = ("subject_id", "target_key", "project", "target_branch", "requested_by")


class ApiError(Exception):
    """An answer other than success: status, short code, human detail and extra fields."""

    def __init__(self, status: int, error: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.http_status = status
        self.body: dict[str, Any] = {"error": error, "detail": detail, **extra}


def invalid(field: str, detail: str) -> NoReturn:
    raise ApiError(422, "invalid", f"{field}: {detail}", field=field)


# -- the request body ------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("an object has the same key twice")
    return value


def load_body() -> dict[str, Any]:
    """The request body as a JSON object within the nesting limit, or an ApiError.

    The body is read within the size limit (413) and GITOPS_BODY_TIMEOUT (408).
    """
    raw = read_body()
    try:
        body = json.loads(
            raw, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys
        )
    except RecursionError:
        invalid("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    except ValueError as exc:  # JSONDecodeError, bad UTF-8, huge integers, NaN, duplicate keys
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        invalid("body", f"must be a JSON object, not {type(body).__name__}")
    if _depth(body) > MAX_JSON_DEPTH:
        invalid("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return body


def _depth(value: Any) -> int:
    """How deep objects and arrays nest (iteratively: no recursion on hostile input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and deepest <= MAX_JSON_DEPTH:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item)
    return deepest


def _text(
    body: dict[str, Any], key: str, *, max_chars: int | None = None, field: str | None = None
) -> str:
    """The string at `key` (reported as `field`), valid Unicode and within `max_chars`."""
    field = field or key
    value = body.get(key)
    if not isinstance(value, str):
        invalid(field, f"must be a string, not {_type(value)}")
    _utf8_bytes(field, value)
    if max_chars is not None and len(value) > max_chars:
        invalid(field, f"is longer than {max_chars} characters")
    return value


def _utf8_bytes(field: str, value: str) -> int:
    """The value's size in UTF-8; refuses lone surrogates (JSON can carry them, UTF-8 cannot)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        invalid(field, "is not valid Unicode text (a lone surrogate)")


def _type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _has_control(value: str, allowed: str = "") -> bool:
    return any(unicodedata.category(c) == "Cc" and c not in allowed for c in value)


@dataclass(frozen=True)
class ChangeBody:
    """A validated POST /changes body, files normalised."""

    subject_id: str
    target_key: str
    project: str
    target_branch: str
    title: str
    requested_by: str
    description: str
    files: list[dict[str, Any]]


def validate_change(body: dict[str, Any], allowed_paths: tuple[str, ...]) -> ChangeBody:
    """Checks fields, types, sizes and paths of a change request; ApiError on the first fault."""
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        invalid(unknown[0], "is not a field of a change request")
    for field in _REQUIRED:
        if field not in body:
            invalid(field, "is required")
    fields: dict[str, str] = {}
    for field in _ID_FIELDS:
        value = _text(body, field, max_chars=MAX_ID_LENGTH)
        if not _ID.fullmatch(value):
            invalid(field, f"must match {ID_PATTERN}")
        fields[field] = value
    _check_branch(fields["target_branch"])
    title = _text(body, "title", max_chars=MAX_TITLE_LENGTH)
    if not title.strip() or _has_control(title):
        invalid("title", "must be one line of text, not blank")
    fields["title"] = title
    description = ""
    if body.get("description") is not None:
        description = _text(body, "description")
        if _utf8_bytes("description", description) > MAX_DESCRIPTION_BYTES:
            invalid("description", f"is larger than {MAX_DESCRIPTION_BYTES} bytes")
        if _has_control(description, allowed="\t\n\r"):
            invalid("description", "contains a control character")
    return ChangeBody(
        **fields,
        description=description,
        files=_validate_files(body.get("files"), allowed_paths),
    )


def _check_branch(branch: str) -> None:
    """Git's ref-name rules that the ID pattern does not already cover (git-check-ref-format)."""
    parts = branch.split("/")
    if (
        ".." in branch
        or "~" in branch
        or ":" in branch
        or "" in parts
        or any(p.startswith(".") or p.endswith(".lock") for p in parts)
        or branch.endswith(".")
        or branch == "@"
    ):
        invalid("target_branch", "is not a valid Git branch name")


def _validate_files(files: Any, allowed_paths: tuple[str, ...]) -> list[dict[str, Any]]:
    if not isinstance(files, list):
        invalid("files", f"must be an array, not {_type(files)}")
    if not files:
        invalid("files", "must list at least one file")
    if len(files) > MAX_FILES:
        invalid("files", f"lists more than {MAX_FILES} files")
    # the contents' total is bounded by MAX_CONTENT_LENGTH on the body itself (413)
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for i, spec in enumerate(files):
        where = f"files[{i}]"
        if not isinstance(spec, dict):
            invalid(where, f"must be an object, not {_type(spec)}")
        unknown = sorted(set(spec) - {"path", "content", "action"})
        if unknown:
            invalid(f"{where}.{unknown[0]}", "is not a field of a file")
        raw_path = spec.get("path")
        if not isinstance(raw_path, str):
            invalid(f"{where}.path", f"must be a string, not {_type(raw_path)}")
        try:
            path = normalise_path(raw_path)
        except UnsafePath as exc:
            raise ApiError(
                422, "invalid_path", exc.reason, path=raw_path, field=f"{where}.path"
            ) from None
        refused = refused_paths([path], allowed=allowed_paths)
        if refused:  # a protected path (CI configuration, CODEOWNERS, ...), or not allowed
            code = "protected_path" if refused[0].kind == "protected" else "invalid_path"
            raise ApiError(422, code, refused[0].reason, path=raw_path, field=f"{where}.path")
        if path in seen:
            raise ApiError(
                422, "invalid_path", "is listed more than once", path=raw_path, field=where
            )
        seen.add(path)
        out.append({"path": path, **_file_change(spec, where)})
    return out


def _file_change(spec: dict[str, Any], where: str) -> dict[str, Any]:
    """`{"content": ...}` or `{"action": "delete"}` from one file entry."""
    if "action" in spec:
        if spec["action"] != "delete":
            invalid(f"{where}.action", 'must be "delete" (give content to create or update)')
        if "content" in spec:
            invalid(where, 'has both content and action "delete"')
        return {"action": "delete"}
    if "content" not in spec:
        invalid(f"{where}.content", 'is required (or action "delete")')
    content = _text(spec, "content", field=f"{where}.content")
    if _utf8_bytes(f"{where}.content", content) > MAX_FILE_BYTES:
        invalid(f"{where}.content", f"is larger than {MAX_FILE_BYTES} bytes")
    if "\x00" in content:
        invalid(f"{where}.content", "contains NUL (binary files are not supported)")
    return {"content": content}


def idempotency_key() -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY_LENGTH or not _IDEMPOTENCY_KEY.fullmatch(key):
        invalid(
            "Idempotency-Key",
            f"must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, no spaces",
        )
    return key


def request_hash(body: dict[str, Any]) -> str:
    """The sha256 of the body's canonical JSON: what an idempotency key is bound to."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# -- submitting ------------------------------------------------------------------------------------
