"""What the tests of the double's flow settings and asynchronous effects share: a project with a
bot (Developer) and alice (Maintainer), a hook for every event, REST calls through `responses`."""

from __future__ import annotations

from typing import Any

import requests

from sim.gitlab import Access, GitLabDouble
from tests.double import Clock

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4"
PROJECT = "platform/config"
P = f"{API}/projects/platform%2Fconfig"


def make_double(clock: Clock, **settings: Any) -> GitLabDouble:
    """A double on the test's clock with PROJECT (`settings` go to `add_project`), its users
    and a hook subscribed to MR, pipeline and deployment events."""
    d = GitLabDouble(URL, clock=clock)
    d.add_project(PROJECT, files={"a.txt": "a\n"}, protect_default=False, **settings)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.add_user("alice", token="alice-token", access={PROJECT: Access.MAINTAINER})
    d.add_hook(PROJECT, "http://bot.test/hook")
    return d


def call(method: str, path: str, token: str = "bot-token", **kw: Any) -> requests.Response:
    """A REST call on PROJECT (`path` after /projects/:id)."""
    return requests.request(method, f"{P}{path}", headers={"PRIVATE-TOKEN": token}, timeout=5, **kw)


def get_json(path: str, token: str = "bot-token") -> Any:
    """GET on PROJECT, answered 200."""
    reply = call("GET", path, token)
    assert reply.status_code == 200, reply.text
    return reply.json()


def read_mr(iid: int) -> dict[str, Any]:
    """GET /merge_requests/:iid (a read: it asks for a recheck of an unchecked MR)."""
    found: dict[str, Any] = get_json(f"/merge_requests/{iid}")
    return found


def listed_mr(iid: int) -> dict[str, Any]:
    """The MR as GET /merge_requests lists it (no recheck asked)."""
    found: dict[str, Any] = next(m for m in get_json("/merge_requests") if m["iid"] == iid)
    return found


def hooks(double: GitLabDouble, kind: str) -> list[dict[str, Any]]:
    """The payloads of one kind of webhook queued since the last take (others are dropped)."""
    return [d.payload for d in double.take_outgoing() if d.kind == kind]


def head_pipeline_id(double: GitLabDouble, iid: int) -> int:
    """The id of the newest pipeline for the MR's head."""
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    return pipeline.id
