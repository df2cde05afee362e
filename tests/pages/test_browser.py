"""The dashboard in a real browser: headless Chromium loads both pages from a local server.

Needs Debian's `chromium` at /usr/bin/chromium, which scripts/test installs; without it the
tests fail rather than skip. `--dump-dom` cannot send
headers, so the server's WSGI app is wrapped in a middleware that adds the API token. A
screenshot of each page is saved under artifacts/ at the repository root.
"""

from __future__ import annotations

import html
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from werkzeug.serving import make_server

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.store.fire import fire
from tests.builders import make_operation
from tests.pages import TOKEN, Pages

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
#: Seconds one Chromium run may take (it loads one local page).
BROWSER_TIMEOUT = 90


@pytest.fixture(autouse=True)
def _chromium_installed() -> None:
    """A missing browser is a broken setup, not a reason to skip (scripts/test installs it)."""
    assert CHROMIUM.exists(), (
        "needs Debian's chromium at /usr/bin/chromium: scripts/test installs it (apt-get)"
    )


WSGI = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def with_token(app: WSGI, token: str) -> WSGI:
    """A middleware that sends the API token with every request, as a signed-in proxy would."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        return app(environ, start_response)

    return wrapped


@contextmanager
def served(app: WSGI) -> Iterator[str]:
    """The app on a real local HTTP server in a thread; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="dashboard-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def chromium(profile: Path, *args: str) -> str:
    """Runs headless Chromium with a throwaway profile and no network of its own; its stdout."""
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=BROWSER_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def visible_text(dom: str) -> str:
    """What a person reads: the DOM without tags, entities decoded, whitespace collapsed."""
    body = dom.split("<body", 1)[-1]
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return " ".join(text.split())


def test_a_person_sees_the_failed_request_and_its_hint(db: Engine, tmp_path: Path) -> None:
    """Chromium shows the overview and the detail page: title, phase words, hint, error, path."""
    failed = make_operation(db, S.MERGING, title="Raise the cache size")
    fire(
        db,
        TransitionRequest(
            failed,
            E.MERGE_ERROR,
            actor="gitops-bot",
            changes={"error_detail": "the target branch is protected"},
        ),
    )
    make_operation(db, S.APPROVAL_SENT, title="Add a replica")
    make_operation(db, S.MERGING, title="<script>document.title='owned'</script>")
    pages = Pages.build(db, step_timeout=3600)
    ARTIFACTS.mkdir(exist_ok=True)

    with served(with_token(pages.app.wsgi_app, TOKEN)) as base:
        overview_dom = chromium(tmp_path / "profile", "--dump-dom", f"{base}/")
        detail_dom = chromium(tmp_path / "profile", "--dump-dom", f"{base}/changes/{failed}")
        for name, path in (("dashboard", "/"), ("dashboard-change", f"/changes/{failed}")):
            shot = ARTIFACTS / f"{name}.png"
            shot.unlink(missing_ok=True)
            chromium(
                tmp_path / "profile",
                f"--screenshot={shot}",
                "--window-size=1280,900",
                f"{base}{path}",
            )
            assert shot.stat().st_size > 10_000

    seen = visible_text(overview_dom)
    assert "Change requests" in seen
    assert "Failed (1)" in seen
    assert "Raise the cache size" in seen
    assert "Awaiting approval" in seen
    assert "Add a replica" in seen
    assert "Please contact the maintainers" in seen
    # the script-like title is text on the page, and no script element exists
    assert "<script>document.title='owned'</script>" in seen
    assert "<script" not in overview_dom.lower()
    assert "<title>Change requests · gitops-bot</title>" in overview_dom

    seen = visible_text(detail_dom)
    assert "Raise the cache size" in seen
    assert "Failed" in seen
    assert "merging the merge request" in seen
    assert "HANDLE_MERGE_FAILED 10106" in seen
    assert "Failed while merging the merge request. Please contact the maintainers" in seen
    assert "Error: the target branch is protected" in seen
    assert "MERGING → HANDLE_FAILED" in seen
    assert "stateDiagram-v2" in seen
