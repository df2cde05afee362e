"""From a pydantic refusal to the API's: the 422 `{"error": "invalid", "detail", "field"}` naming
the field as the request spelt it (`files[0].path`), or the model's own code (`invalid_path`,
`protected_path`, with `path`); and `refuse()`, how a model's validator says no.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, Tag, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from webhooks.api_body import ApiError

#: Tags of the models' discriminated unions: pydantic puts them in an error's location, the API's
#: field names leave them out.
_TAGS: set[str] = set()


def union_tag(name: str) -> Tag:
    """A tag for one member of a discriminated union (left out of the fields refusals name)."""
    _TAGS.add(name)
    return Tag(name)


def refuse(detail: str, **ctx: Any) -> PydanticCustomError:
    """A refusal named by the API's own code: `invalid` unless `code` says otherwise.

    `ctx["at"]` (a tuple) is appended to where the error was raised, naming the field it is
    about (a check on a whole object about one of its fields).
    """
    return PydanticCustomError(ctx.pop("code", "invalid"), detail, ctx)


def carried(path: str) -> str:
    """The path as an error's context can carry it (pydantic's errors are Rust strings: a lone
    surrogate, which JSON can carry, would not survive); `_given()` undoes it."""
    return path.encode("utf-8", "surrogatepass").decode("latin-1")


def _given(carried: str) -> str:
    return carried.encode("latin-1").decode("utf-8", "surrogatepass")


Model = TypeVar("Model", bound=BaseModel)


def validated(
    model: type[Model], data: Any, *, context: dict[str, Any] | None = None, top: bool = False
) -> Model:
    """`data` as the model, or the ApiError for its first fault (`top`: name only the parameter,
    as a query or header does)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise _api_error(_first(exc.errors()), top=top) from None


def _first(errors: list[ErrorDetails]) -> ErrorDetails:
    """The fault the API names: an unknown field first, then a missing one, then in order."""
    rank = {"extra_forbidden": 0, "missing": 1}
    return min(errors, key=lambda e: rank.get(e["type"], 2))


def _api_error(error: ErrorDetails, *, top: bool) -> ApiError:
    ctx = dict(error.get("ctx") or {})
    loc = [part for part in error["loc"] if part not in _TAGS] + list(ctx.get("at", ()))
    field = _field(loc[:1] if top else loc)
    if error["type"] in ("invalid_path", "protected_path"):
        return ApiError(422, error["type"], error["msg"], path=_given(ctx["path"]), field=field)
    if error["type"] == "callback_not_allowed":
        return ApiError(422, error["type"], f"{field}: {error['msg']}", field=field)
    return ApiError(422, "invalid", f"{field}: {_detail(error, loc)}", field=field)


def _field(loc: list[int | str]) -> str:
    """`files[0].path` from ("files", 0, "path"); `body` for the body as a whole."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return text.lstrip(".") or "body"


def _detail(error: ErrorDetails, loc: list[int | str]) -> str:
    """What is wrong, for people (pydantic's own words when ours would say no more)."""
    ctx = error.get("ctx") or {}
    given = _kind(error.get("input"))
    match error["type"]:
        case "missing":
            return "is required" + (' (or action "delete")' if loc[-1:] == ["content"] else "")
        case "extra_forbidden":
            return "is not a field of " + ("a change request" if len(loc) == 1 else "a file")
        case "string_type":
            return f"must be a string, not {given}"
        case "list_type":
            return f"must be an array, not {given}"
        case "model_type" | "dict_type" | "model_attributes_type":
            return f"must be an object, not {given}"
        case "string_unicode":
            return "is not valid Unicode text (a lone surrogate)"
        case "string_too_long":
            return f"is longer than {ctx['max_length']} characters"
        case "string_too_short":
            return "must not be empty"
        case "string_pattern_mismatch":
            return f"must match {ctx['pattern']}"
        case "too_short":  # only `files` has a least and a most
            return "must list at least one file"
        case "too_long":
            return f"lists more than {ctx['max_length']} files"
        case "literal_error":
            return f"must be {ctx['expected']} (give content to create or update)"
        case "enum":
            return f"unknown value {error.get('input')!r}; one of {ctx['expected']}"
        case "less_than_equal":
            return f"must be at most {ctx['le']}"
        case "greater_than_equal":
            return f"must be at least {ctx['ge']}"
        case "int_parsing" | "int_type":
            return "must be a whole number"
    return error["msg"]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )
