"""`gitops-bot demo` as a newcomer runs it: one command, two changes, both VALIDATED."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.e2e.cluster import BIN, ROOT

pytestmark = pytest.mark.e2e


def test_demo_ends_with_both_changes_validated() -> None:
    """The demo exits 0 after printing each change's moves up to VALIDATED and the URLs."""
    done = subprocess.run(
        [str(BIN / "gitops-bot"), "demo", "--timeout", "120"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert re.search(r"dashboard\s+http://127\.0\.0\.1:\d+/\s", out), out
    assert re.search(r"status API\s+http://127\.0\.0\.1:\d+/api/v1/changes/", out), out
    for order in ("approve_first", "mr_first"):
        assert re.search(rf"{order}\s+MERGED -> VALIDATED", out), out
        assert re.search(rf"^{order}\s+\S+\s+VALIDATED$", out, re.MULTILINE), out
    assert "both VALIDATED" in out
    assert "label gitops::in-effect" in out
