"""The fixture of the MR-command tests: the whole bot with its doubles and the people of the
role matrix (tests/commands/__init__.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from tests.commands import running_bot
from tests.workflow.harness import Bot


@pytest.fixture
def bot(db: Engine) -> Iterator[Bot]:
    """The whole bot with the GitLab double, the approval fake and the people of the matrix."""
    with running_bot(db) as running:
        yield running
