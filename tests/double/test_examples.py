"""The double's webhook payloads start from the suite's documented GitLab examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.gitlab.webhooks import EVENTS, FIXTURES

SUITE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("kind", sorted(EVENTS))
def test_packaged_example_equals_the_suite_fixture(kind: str) -> None:
    """Each example shipped with the double is byte-for-byte the fixture the suite parses."""
    name = EVENTS[kind][0]
    assert (FIXTURES / name).read_bytes() == (SUITE_FIXTURES / name).read_bytes()
