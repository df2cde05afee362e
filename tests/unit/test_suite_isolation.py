"""The suite's two processes share one Redis server (databases 15 and 14): a test that empties
the whole server (FLUSHALL) loses the other process's queued and scheduled jobs mid-test, and a
change there stops where its job was lost. Every test empties only its own database."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_empties_the_whole_redis_server() -> None:
    """No `flushall(` in the tests (this file names it only in a pattern)."""
    pattern = re.compile(r"\.flush" + r"all\s*\(", re.IGNORECASE)
    found = [
        f"{path.relative_to(TESTS)}:{n}"
        for path in sorted(TESTS.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == [], f"FLUSHALL empties the other test process's Redis database: {found}"
