"""The status comment, labels and reactions against a mocked GitLab: one comment per operation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import responses
from responses import matchers

from bot.gitlab import (
    GitLabRefused,
    find_note,
    react,
    set_labels,
    status_marker,
    upsert_status_note,
)
from tests.adapters.test_gitlab_harness import API, P, account, calls, mock_gitlab

NOTES = f"{P}/merge_requests/7/notes"
MARK = status_marker("op-1")


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    """The mocked GitLab of one test."""
    with mock_gitlab() as mock:
        yield mock


def _note(note_id: int, body: str, author: str = "gitops-bot", **kw: Any) -> dict[str, Any]:
    return {"id": note_id, "body": body, "author": {"username": author}, "system": False, **kw}


def test_marker_names_the_operation() -> None:
    """The hidden marker is an HTML comment carrying the operation id."""
    assert status_marker("op-1") == "<!-- gitops-bot:status:op-1 -->"


def test_status_note_created_once_then_edited_in_place(rsps: responses.RequestsMock) -> None:
    """The first call creates the comment; the second finds it by its marker and edits it (PUT)."""
    first_body = f"{MARK}\nPhase: checking"
    rsps.add(responses.GET, NOTES, json=[_note(1, "LGTM", "alice")])
    rsps.add(
        responses.POST,
        NOTES,
        status=201,
        json=_note(55, first_body),
        match=[matchers.json_params_matcher({"body": first_body})],
    )
    rsps.add(responses.GET, NOTES, json=[_note(1, "LGTM", "alice"), _note(55, first_body)])
    rsps.add(
        responses.PUT,
        f"{NOTES}/55",
        json=_note(55, f"{MARK}\nPhase: merging"),
        match=[matchers.json_params_matcher({"body": f"{MARK}\nPhase: merging"})],
    )
    project = account().project(42)

    assert upsert_status_note(project, 7, "op-1", "Phase: checking") == 55
    assert upsert_status_note(project, 7, "op-1", "Phase: merging") == 55

    assert len(rsps.calls) == 4  # two per call: list + POST, then list + PUT
    assert calls(rsps).count("POST /projects/42/merge_requests/7/notes") == 1
    assert calls(rsps).count("PUT /projects/42/merge_requests/7/notes/55") == 1


def test_unchanged_status_is_not_written_again(rsps: responses.RequestsMock) -> None:
    """Writing the same status twice edits nothing (no notification, no call)."""
    rsps.add(responses.GET, NOTES, json=[_note(55, f"{MARK}\nPhase: checking")])

    assert upsert_status_note(account().project(42), 7, "op-1", "Phase: checking") == 55
    assert len(rsps.calls) == 1


def test_marker_pasted_by_a_person_is_not_ours(rsps: responses.RequestsMock) -> None:
    """A person's comment quoting the marker is ignored: the bot writes its own comment."""
    rsps.add(responses.GET, NOTES, json=[_note(3, f"> {MARK}\n> quoted", "mallory")])
    rsps.add(responses.POST, NOTES, status=201, json=_note(56, MARK))

    assert upsert_status_note(account().project(42), 7, "op-1", "Phase: checking") == 56


def test_status_note_reads_the_bot_username_once(rsps: responses.RequestsMock) -> None:
    """The bot's username (to recognise its own comments) comes from GET /user, once."""
    rsps.add(responses.GET, f"{API}/user", json={"username": "gitops-bot"})
    rsps.add(responses.GET, NOTES, json=[_note(55, f"{MARK}\nold")])
    rsps.add(responses.PUT, f"{NOTES}/55", json=_note(55, "x"))
    rsps.add(responses.GET, NOTES, json=[_note(55, f"{MARK}\nnew")])
    project = account(username=None).project(42)

    upsert_status_note(project, 7, "op-1", "new")
    upsert_status_note(project, 7, "op-1", "new")

    assert calls(rsps).count("GET /user") == 1


def test_find_note_by_marker(rsps: responses.RequestsMock) -> None:
    """find_note returns the comment with the marker, skipping system notes, or None."""
    rsps.add(
        responses.GET,
        NOTES,
        json=[_note(2, f"{MARK} system", system=True), _note(9, f"{MARK}\nstatus")],
    )
    rsps.add(responses.GET, NOTES, json=[])
    project = account().project(42)

    assert find_note(project, 7, MARK) == 9
    assert find_note(project, 7, MARK) is None


def test_labels_in_one_call(rsps: responses.RequestsMock) -> None:
    """The phase label changes with add_labels and remove_labels in a single PUT."""
    rsps.add(
        responses.PUT,
        f"{P}/merge_requests/7",
        json={"iid": 7},
        match=[
            matchers.json_params_matcher(
                {
                    "add_labels": "gitops::merging",
                    "remove_labels": "gitops::checking,gitops::failed",
                }
            )
        ],
    )

    set_labels(
        account().project(42),
        7,
        add=["gitops::merging"],
        remove=["gitops::checking", "gitops::failed"],
    )

    assert len(rsps.calls) == 1


def test_no_label_change_makes_no_call(rsps: responses.RequestsMock) -> None:
    """Nothing to add and nothing to remove makes no call."""
    set_labels(account().project(42), 7, add=[], remove=[])
    assert len(rsps.calls) == 0


def test_react_awards_the_emoji(rsps: responses.RequestsMock) -> None:
    """A reaction is one award_emoji call on the comment."""
    rsps.add(
        responses.POST,
        f"{NOTES}/12/award_emoji",
        status=201,
        json={"id": 1, "name": "eyes"},
        match=[matchers.json_params_matcher({"name": "eyes"})],
    )

    assert react(account().project(42), 7, 12, "eyes") is True
    assert len(rsps.calls) == 1


@pytest.mark.parametrize("status", [404, 400])
def test_react_already_awarded_is_success(rsps: responses.RequestsMock, status: int) -> None:
    """A repeat award ("has already been taken", 404 or 400) counts as done."""
    rsps.add(
        responses.POST,
        f"{NOTES}/12/award_emoji",
        status=status,
        json={"message": "Award Emoji Name has already been taken"},
    )

    assert react(account().project(42), 7, 12, "eyes") is False


def test_react_on_a_missing_note_still_fails(rsps: responses.RequestsMock) -> None:
    """A 404 for another reason (the comment is gone) is raised, not taken for a repeat."""
    rsps.add(
        responses.POST, f"{NOTES}/12/award_emoji", status=404, json={"message": "404 Not found"}
    )

    with pytest.raises(GitLabRefused) as caught:
        react(account().project(42), 7, 12, "eyes")
    assert caught.value.status_code == 404
