"""The outbox tests' dispatcher, wired to the GitLab double and the approval system's mock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from tests.outbox import Harness, harness


@pytest.fixture
def h(db: Engine) -> Iterator[Harness]:
    """The dispatcher wired to the GitLab double and the approval system's mock."""
    with harness(db) as wired:
        yield wired
