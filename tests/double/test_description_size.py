"""MR descriptions as long as GitLab allows (1,048,576 characters), in the API and in the Merge
Request Hook, which carries an edited description twice (`changes.description.previous` and
`current`) besides `object_attributes.description`.

Sources: gitlabhq app/models/concerns/issuable.rb (`DESCRIPTION_LENGTH_MAX = 1.megabyte`,
validated as a length in characters), lib/api/merge_requests.rb (`description`: "Limited to
1,048,576 characters."; a validation error is 400), app/services/merge_requests/update_service.rb
and the Merge Request Hook's `changes` (doc/user/project/integrations/webhook_events.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from sim.gitlab import Access, GitLabDouble

URL = "https://gitlab.example.com"
PROJECT = "platform/config"
P = f"{URL}/api/v4/projects/platform%2Fconfig"
LIMIT = 1_048_576


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    d = GitLabDouble(URL)
    d.add_project(PROJECT, files={"a.txt": "a\n"})
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.add_hook(PROJECT, "http://bot.test/hook", events=["merge_requests_events"])
    d.push(PROJECT, "feature", {"b.txt": "b\n"}, author="bot")
    with d.mocked(URL):
        yield d


def call(method: str, path: str, **kw: Any) -> requests.Response:
    headers = {"PRIVATE-TOKEN": "bot-token"}
    return requests.request(method, f"{P}{path}", headers=headers, timeout=10, **kw)


def test_a_description_of_the_largest_size_is_kept_and_sent_twice_in_the_update_hook(
    double: GitLabDouble,
) -> None:
    """An MR opened with 1,048,576 characters of description (2 MiB of UTF-8: the limit counts
    characters), then edited to another 1,048,576: both calls succeed, the API answers the whole
    text, and the update's Merge Request Hook carries the old and the new text in full in
    `changes.description` (and the new one in object_attributes): a body of more than 6 MiB."""
    first, second = "é" * LIMIT, "ü" * LIMIT
    data = {"source_branch": "feature", "target_branch": "main", "title": "big"}
    opened = call("POST", "/merge_requests", json=data | {"description": first})
    assert opened.status_code == 201
    iid = opened.json()["iid"]
    assert opened.json()["description"] == first
    double.take_outgoing()

    edited = call("PUT", f"/merge_requests/{iid}", json={"description": second})

    assert (edited.status_code, len(edited.json()["description"])) == (200, LIMIT)
    (hook,) = double.take_outgoing()
    payload = hook.payload
    assert payload["changes"]["description"] == {"previous": first, "current": second}
    assert payload["object_attributes"]["description"] == second
    assert len(hook.body) > 6 * LIMIT


def test_a_description_over_the_limit_is_refused(double: GitLabDouble) -> None:
    """One character more: 400 with the validation message, on create and on update; the MR
    keeps its description and no hook is sent for the refused update."""
    over = "x" * (LIMIT + 1)
    message = {"message": {"description": [f"is too long (maximum is {LIMIT} characters)"]}}
    data = {"source_branch": "feature", "target_branch": "main", "title": "t"}
    refused = call("POST", "/merge_requests", json=data | {"description": over})
    assert (refused.status_code, refused.json()) == (400, message)
    iid = call("POST", "/merge_requests", json=data | {"description": "small"}).json()["iid"]
    double.take_outgoing()
    update = call("PUT", f"/merge_requests/{iid}", json={"description": over})
    assert (update.status_code, update.json()) == (400, message)
    assert double.mr(PROJECT, iid).description == "small"
    assert double.take_outgoing() == []
