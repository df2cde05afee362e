"""The operator's `flags`: list, get and set the dynamic flags (read per use: no restart)."""

from __future__ import annotations

import json
from typing import Any

from bot.services import Services
from bot.store.flags import DEFAULTS, UnknownFlag, flag_rows, get_flag, set_flag
from gitops_bot.ops import Refused, as_json, table
from webhooks.pages import utc


def flag_values(services: Services) -> dict[str, Any]:
    """Every flag's current value (for `flags --json`)."""
    return {key: value for key, value, _ in flag_rows(services.engine)}


def flags_text(services: Services) -> str:
    """The flags for people: key, value as JSON, and when it was set."""
    rows = [
        [key, as_json(value), "default" if at is None else f"set {utc(at)} UTC"]
        for key, value, at in flag_rows(services.engine)
    ]
    return table(["FLAG", "VALUE", "SINCE"], rows)


def parse_value(raw: str) -> Any:
    """A typed value: JSON when it parses (`3`, `[[10,6]]`, `"x"`), else the text itself."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def known(key: str) -> str:
    """`key`, or a refusal listing the flags there are."""
    if key not in DEFAULTS:
        raise Refused(f"unknown flag {key!r}; the flags are: {', '.join(DEFAULTS)}")
    return key


def get_value(services: Services, key: str) -> Any:
    """The flag's current value."""
    return get_flag(services.engine, known(key))


def set_value(services: Services, key: str, raw: str) -> tuple[Any, Any]:
    """Sets the flag from typed text; (old, new) values, or a refusal saying what it expects."""
    engine = services.engine
    old = get_flag(engine, known(key))
    try:
        set_flag(engine, key, parse_value(raw))
    except UnknownFlag:
        raise Refused(f"unknown flag {key!r}") from None
    except ValueError as exc:
        raise Refused(f"refused: {exc} (got {raw!r}); the flag is unchanged") from None
    return old, get_flag(engine, key)
