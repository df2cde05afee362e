"""Which product files one merge-request hook crosses, from the Flask route to GitLab's calls.

Usage: .venv/bin/python -m tests.bench.trace_hook

An approve-first change waits in MERGING with its approvals given; a person pushes to its branch
and GitLab's Merge Request Hook (action update, a new head) reaches POST /webhooks/gitlab. The
in-process bot stores it, processes it, runs the operation's step and reads GitLab. A profile
hook records every product function called on the way (bot, webhooks, jobs, gitops_bot; not the
tests, the doubles or libraries) until the step's first GitLab call, and prints the files in the
order first entered, how often the path switches between packages, and the queue hand-offs.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

import fakeredis
import responses

from bot.core.states import Flow
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from tests.builders import operation
from tests.workflow.harness import PROJECT, SECRETS, Bot

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "webhooks", "jobs", "gitops_bot")


def _product_file(filename: str) -> str | None:
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    parts = relative.parts
    if not parts or parts[0] not in PRODUCT or "fakes" in parts:
        return None
    return str(relative)


def trace() -> dict[str, Any]:
    """The files (in order), package switches and queue hand-offs of one MR hook."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/trace.sqlite3")
        upgrade(engine)
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            bot = Bot(engine, fakeredis.FakeRedis(), rsps)
            try:
                return _one_hook(bot)
            finally:
                bot.close()


def _one_hook(bot: Bot) -> dict[str, Any]:
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    op = operation(bot.services.engine, op_id)
    bot.gitlab.set_merge_status(PROJECT, op["mr_iid"], "checking")
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.gitlab.push(PROJECT, op["branch"], {"config/prod.yaml": "replicas: 9\n"})
    headers, body = bot.gitlab.webhook(
        "merge_request",
        project=PROJECT,
        iid=op["mr_iid"],
        action="update",
        token=SECRETS["webhook"],
    )
    files: list[str] = []
    calls_before = len(bot.gitlab.calls)
    handoffs = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal handoffs
        if event != "call" or len(bot.gitlab.calls) > calls_before:
            return
        found = _product_file(frame.f_code.co_filename)
        if found is None:
            return
        if not files or files[-1] != found:
            files.append(found)
        if frame.f_code.co_name in ("enqueue", "enqueue_in") and "queue" in found:
            handoffs += 1

    started = time.perf_counter()
    sys.setprofile(profile)
    try:
        bot.client.post("/webhooks/gitlab", data=body, headers=headers)
        bot.settle()
    finally:
        sys.setprofile(None)
    distinct = list(dict.fromkeys(files))
    packages = [
        f.split("/")[0] + ("/" + f.split("/")[1] if f.startswith("bot/") else "") for f in files
    ]
    switches = sum(1 for a, b in itertools.pairwise(packages) if a != b)
    return {
        "files": distinct,
        "switches": switches,
        "handoffs": handoffs,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    """Prints the trace."""
    found = trace()
    print(f"files crossed from the route to the first GitLab call: {len(found['files'])}")
    for name in found["files"]:
        print(f"  {name}")
    print(f"switches between packages on the way: {found['switches']}")
    print(f"queue hand-offs: {found['handoffs']}")


if __name__ == "__main__":
    main()
