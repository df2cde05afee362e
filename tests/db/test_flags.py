"""Dynamic flags: defaults, changes seen on the next read, bad values refused."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from bot.store.flags import DEFAULTS, UnknownFlag, all_flags, get_flag, set_flag


def test_defaults_until_set_then_the_new_value(db: Engine) -> None:
    """A flag reads its default, then whatever was set last, with no restart."""
    assert get_flag(db, "workflow.order") == "approve_first"
    set_flag(db, "workflow.order", "mr_first")
    assert get_flag(db, "workflow.order") == "mr_first"
    set_flag(db, "workflow.order", "approve_first")
    assert all_flags(db) == dict(DEFAULTS)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("workflow.order", "sideways"),
        ("approve.impl", "curl"),
        ("queue.max_length", "10"),
        ("queue.max_length", True),
        ("poll.pipeline_tiers", [[10]]),
        ("poll.pipeline_tiers", [[0, 5]]),
        ("poll.rebase_tiers", []),
        ("reconcile.watermark_projects", "platform/config"),
    ],
)
def test_bad_values_are_refused_and_change_nothing(db: Engine, key: str, value: object) -> None:
    """A value of the wrong shape is refused with what the flag expects; the old one stays."""
    with pytest.raises(ValueError, match=key):
        set_flag(db, key, value)
    assert get_flag(db, key) == DEFAULTS[key]


def test_unknown_flags_are_refused(db: Engine) -> None:
    """Reading or setting a flag that does not exist is an error, not a silent default."""
    with pytest.raises(UnknownFlag):
        get_flag(db, "no.such.flag")
    with pytest.raises(UnknownFlag):
        set_flag(db, "no.such.flag", 1)
