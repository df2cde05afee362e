"""The REST API's requests as pydantic models: the one statement of what the API accepts.

The models validate each request (webhooks/api.py) and the OpenAPI document is generated from them
(webhooks/openapi.py), so the document and the refusals say the same limits. A model's refusal
becomes the API's 422 `{"error": "invalid", "detail", "field"}` (or `invalid_path` and
`protected_path`, with `path`) through webhooks/api_refusals.py's `validated()`; the answers'
models are in webhooks/api_views.py.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Literal

from flask import request
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.core.callbacks import MAX_URL_LENGTH, refusal
from bot.core.path_policy import refused_paths
from bot.core.paths import MAX_PATH_LENGTH, UnsafePath, normalise_path
from bot.core.states import BindingState
from webhooks.api_body import OPERATION_ID_PATTERN
from webhooks.api_refusals import carried, refuse, union_tag, validated

MAX_ID_LENGTH = 255
#: subject_id, target_key, project, target_branch, requested_by: no spaces, quotes or controls.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/@:+!=~-]*$"
#: What the document says of the fields a validator below checks (tests/api/test_contract.py
#: holds each pattern to its validator); the validators give the clearer refusal.
BRANCH_PATTERN = (
    r"^(?!.*\.\.)(?!.*//)(?!.*/$)(?!.*\.$)(?!@$)(?!.*/\.)(?!.*\.lock(?:/|$))"
    r"[A-Za-z0-9][A-Za-z0-9._/@+!=-]*$"
)
TITLE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
DESCRIPTION_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
CONTENT_PATTERN = r"^[^\x00]*$"
MAX_TITLE_LENGTH = 255
MAX_DESCRIPTION_BYTES = 64 * 1024
MAX_FILES = 100
MAX_FILE_BYTES = 512 * 1024
MAX_IDEMPOTENCY_KEY_LENGTH = 255
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]+$"
DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 500

_STRICT = ConfigDict(extra="forbid", strict=True)
#: The 422 code of a callback_url the bot will not call.
CALLBACK_NOT_ALLOWED = "callback_not_allowed"


def _utf8_size(value: str) -> int:
    return len(value.encode("utf-8"))


def _has_control(value: str, allowed: str = "") -> bool:
    return any(unicodedata.category(c) == "Cc" and c not in allowed for c in value)


# -- a change request ------------------------------------------------------------------------------

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
FilePath = Annotated[
    str,
    Field(
        json_schema_extra={"minLength": 1, "maxLength": MAX_PATH_LENGTH},
        description="A relative path: no `..`, no empty segment, no backslash or control "
        "character, nothing under `.git/`, not a protected path (`.gitlab-ci.yml`, `.gitlab/`, "
        "the CODEOWNERS files, `.gitattributes`, the policy file) unless GITOPS_ALLOWED_PATHS "
        "names it, and under one of GITOPS_ALLOWED_PATHS when set. `.` segments are dropped; "
        "the normalised path is what gets committed.",
    ),
]


class _File(BaseModel):
    """A file entry: its path checked and normalised (against the allowed paths in the context)."""

    model_config = _STRICT
    path: FilePath
    _given: str = PrivateAttr(default="")

    @model_validator(mode="wrap")
    @classmethod
    def _normalised(cls, data: Any, handler: Any, info: ValidationInfo) -> Any:
        raw = data.get("path") if isinstance(data, dict) else None
        if isinstance(raw, str):
            data = {**data, "path": _checked_path(raw, info.context or {})}
        model = handler(data)
        model._given = raw or ""
        return model

    @property
    def given(self) -> str:
        """The path as the request spelt it (what a refusal names)."""
        return self._given


def _checked_path(raw: str, context: dict[str, Any]) -> str:
    """The normalised path, or `invalid_path` / `protected_path` naming it (the context gives
    the allowed and protected paths; `paths_later`: only whether it is a safe path)."""
    try:
        path = normalise_path(raw)
    except UnsafePath as exc:
        raise refuse(exc.reason, code="invalid_path", path=carried(raw), at=("path",)) from None
    if context.get("paths_later"):
        return path
    allowed: tuple[str, ...] = context.get("allowed_paths", ())
    refused = refused_paths([path], allowed=allowed, protected=context.get("protected", ()))
    if refused:  # a protected path (CI configuration, CODEOWNERS, ...), or not allowed
        code = "protected_path" if refused[0].kind == "protected" else "invalid_path"
        raise refuse(refused[0].reason, code=code, path=carried(raw), at=("path",))
    return path


class FileContent(_File):
    """Create or update a file with this content."""

    content: str = Field(
        description=f"At most {MAX_FILE_BYTES} bytes of UTF-8, no NUL.",
        json_schema_extra={"pattern": CONTENT_PATTERN},
    )

    @field_validator("content")
    @classmethod
    def _text(cls, value: str) -> str:
        if _utf8_size(value) > MAX_FILE_BYTES:
            raise refuse(f"is larger than {MAX_FILE_BYTES} bytes")
        if "\x00" in value:
            raise refuse("contains NUL (binary files are not supported)")
        return value


class FileDelete(_File):
    """Delete the file."""

    action: Literal["delete"]

    @model_validator(mode="before")
    @classmethod
    def _not_both(cls, data: Any) -> Any:
        if isinstance(data, dict) and "content" in data:
            raise refuse('has both content and action "delete"')
        return data


def _file_kind(value: Any) -> str:
    return "FileDelete" if isinstance(value, dict) and "action" in value else "FileContent"


FileChange = Annotated[
    Annotated[FileContent, union_tag("FileContent")]
    | Annotated[FileDelete, union_tag("FileDelete")],
    Discriminator(_file_kind),
]


class ChangeRequest(BaseModel):
    """POST /api/v1/changes: what changes, where, and the files."""

    model_config = _STRICT

    subject_id: Id = Field(description="What changes (a service, an MR...).")
    target_key: Id = Field(description="Where (a config file, an environment...).")
    project: Id = Field(description="The GitLab project path or id.")
    target_branch: Id = Field(
        description="A valid Git branch name.", json_schema_extra={"pattern": BRANCH_PATTERN}
    )
    title: str = Field(
        min_length=1,
        max_length=MAX_TITLE_LENGTH,
        description="One line of text, not blank.",
        json_schema_extra={"pattern": TITLE_PATTERN},
    )
    files: list[FileChange] = Field(
        min_length=1,
        max_length=MAX_FILES,
        description="Distinct paths; contents together within the body limit "
        "(GITOPS_MAX_BODY_BYTES).",
    )
    requested_by: Id | None = Field(
        default=None,
        description="Who asks: the approval request's applicant. Leave it out: the API "
        "client's name. Only a client created with `--on-behalf` may name someone else (its "
        "audit rows read `<user> via <client>`); from any other client a different name is "
        "refused with 422 `invalid` naming this field.",
    )
    description: (
        Annotated[str, Field(json_schema_extra={"pattern": DESCRIPTION_PATTERN})] | None
    ) = Field(
        default=None,
        description=f"At most {MAX_DESCRIPTION_BYTES} bytes of UTF-8; tabs and line breaks "
        "but no other control character.",
    )
    callback_url: str | None = Field(
        default=None,
        max_length=MAX_URL_LENGTH,
        description="Where the bot POSTs each phase change of this request, signed (README, "
        '"Completion callbacks"). Its host must be listed in GITOPS_CALLBACK_HOSTS (https, or '
        "http for a host listed with `http://`; no user name, no IP address) and the bot must "
        "have GITOPS_CALLBACK_SECRET, else 422 `callback_not_allowed`. Part of the request an "
        "Idempotency-Key is bound to.",
    )

    @field_validator("callback_url")
    @classmethod
    def _callback(cls, url: str | None, info: ValidationInfo) -> str | None:
        """Only to an allowed host, and only when the bot can sign (no SSRF)."""
        if url is None:
            return None
        context = info.context or {}
        if not context.get("callback_secret"):
            raise refuse(
                "the bot has no callback secret (GITOPS_CALLBACK_SECRET): it sends no callbacks",
                code=CALLBACK_NOT_ALLOWED,
            )
        why = refusal(url, context.get("callback_hosts", ()))
        if why is not None:
            raise refuse(why, code=CALLBACK_NOT_ALLOWED)
        return url

    @field_validator("target_branch")
    @classmethod
    def _branch(cls, branch: str) -> str:
        """Git's ref-name rules the ID pattern does not already cover (git-check-ref-format)."""
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
            raise refuse("is not a valid Git branch name")
        return branch

    @field_validator("title")
    @classmethod
    def _one_line(cls, title: str) -> str:
        if not title.strip() or _has_control(title):
            raise refuse("must be one line of text, not blank")
        return title

    @field_validator("description")
    @classmethod
    def _description(cls, text: str | None) -> str | None:
        if text is not None and _utf8_size(text) > MAX_DESCRIPTION_BYTES:
            raise refuse(f"is larger than {MAX_DESCRIPTION_BYTES} bytes")
        if text is not None and _has_control(text, allowed="\t\n\r"):
            raise refuse("contains a control character")
        return text

    @model_validator(mode="after")
    def _distinct_paths(self) -> ChangeRequest:
        seen: set[str] = set()
        for i, file in enumerate(self.files):
            if file.path in seen:
                raise refuse(
                    "is listed more than once",
                    code="invalid_path",
                    path=carried(file.given),
                    at=("files", i),
                )
            seen.add(file.path)
        return self

    def file_changes(self) -> list[dict[str, Any]]:
        """The files as the operation stores them: normalised path, then content or action."""
        return [
            {"path": f.path, "content": f.content}
            if isinstance(f, FileContent)
            else {"path": f.path, "action": "delete"}
            for f in self.files
        ]


# -- path, query and headers -----------------------------------------------------------------------


def _states(value: Any) -> Any:
    """Repeated `state` parameters, each possibly comma-separated, upper-cased; an empty one
    (`state=`, `state=MERGING,`) names no state and is refused."""
    if not isinstance(value, list):
        return value
    names = [part.strip().upper() for raw in value for part in str(raw).split(",")]
    if "" in names:
        raise refuse(
            "must name a state (an empty value is none); one of "
            + ", ".join(s.value for s in BindingState)
        )
    return names


def _whole_number(value: Any) -> Any:
    """Digits only (no sign, space, underscore or decimal point) before the range check."""
    if isinstance(value, str) and not re.fullmatch(r"[0-9]{1,6}", value):
        raise refuse(f"must be a whole number from 1 to {MAX_LIST_LIMIT}")
    return int(value) if isinstance(value, str) else value


class ListQuery(BaseModel):
    """GET /api/v1/changes's query: which states, how many."""

    model_config = ConfigDict(extra="ignore")

    state: Annotated[list[BindingState], BeforeValidator(_states)] = Field(
        default_factory=list,
        description="Repeat (or separate with commas) for several; left out: all. An empty "
        "value names no state and is refused.",
    )
    limit: Annotated[int, BeforeValidator(_whole_number)] = Field(
        default=DEFAULT_LIST_LIMIT, ge=1, le=MAX_LIST_LIMIT
    )


class OperationPath(BaseModel):
    """The path parameter of the routes about one operation (anything else is a 404 without a
    look-up: webhooks/api.py)."""

    operation_id: str = Field(pattern=OPERATION_ID_PATTERN)


def _printable_key(value: Any) -> Any:
    if isinstance(value, str) and not (
        0 < len(value) <= MAX_IDEMPOTENCY_KEY_LENGTH
        and re.fullmatch(IDEMPOTENCY_KEY_PATTERN, value)
    ):
        raise refuse(
            f"must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, no spaces"
        )
    return value


IdempotencyKey = Annotated[
    str,
    BeforeValidator(_printable_key),
    Field(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_LENGTH, pattern=IDEMPOTENCY_KEY_PATTERN),
]


class SubmitHeaders(BaseModel):
    """POST /api/v1/changes's own header."""

    model_config = ConfigDict(extra="ignore")

    idempotency_key: IdempotencyKey | None = Field(
        default=None,
        alias="Idempotency-Key",
        description="The same key with the same body answers the same 202 (a request refused as "
        "overloaded is retried instead); with another body, 422 `idempotency_key_reused`.",
    )


def idempotency_key() -> str | None:
    """The request's Idempotency-Key (None without one), or 422 naming the header."""
    headers = {"Idempotency-Key": request.headers.get("Idempotency-Key")}
    return validated(SubmitHeaders, headers, top=True).idempotency_key
