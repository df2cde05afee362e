"""The double's tests' fixtures."""

from __future__ import annotations

import pytest

from tests.double import Clock


@pytest.fixture
def clock() -> Clock:
    """A clock the test moves, for `GitLabDouble(clock=...)`."""
    return Clock()
