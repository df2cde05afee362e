"""The documented GitLab payloads, quirks included, parse into the typed events the bot uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.ingress.gitlab_events import (
    DeploymentEvent,
    MergeRequestEvent,
    NoteEvent,
    PipelineEvent,
    parse,
)
from bot.ingress.jsonload import Unusable

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def payload(name: str) -> dict[str, Any]:
    """A documented payload from tests/fixtures."""
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def test_merge_request_uses_the_mr_target_project_not_the_hook_project() -> None:
    """The MR payload's project.id (1) differs from its target_project_id (14): the MR's wins."""
    event = parse("Merge Request Hook", payload("merge_request.json"))
    assert isinstance(event, MergeRequestEvent)
    assert (event.project_id, event.iid, event.action, event.state) == (14, 1, "open", "opened")
    assert event.detailed_merge_status == "mergeable"


def test_pipeline_for_an_mr_carries_its_iid() -> None:
    """An MR pipeline names the MR; its status, sha and source are read."""
    event = parse("Pipeline Hook", payload("pipeline.json"))
    assert isinstance(event, PipelineEvent)
    assert (event.pipeline_id, event.status, event.source, event.mr_iid) == (
        31,
        "success",
        "merge_request_event",
        1,
    )
    assert event.sha == "bcbb5ec396a2c0f828686f14fac9b80b780504f2"


def test_note_on_an_mr_with_its_odd_timestamps() -> None:
    """The MR note parses even though its last_commit timestamp is not valid ISO 8601."""
    event = parse("Note Hook", payload("note_merge_request.json"))
    assert isinstance(event, NoteEvent)
    assert (event.note, event.action, event.system, event.mr_iid) == (
        "This MR needs work.",
        "create",
        False,
        1,
    )
    assert event.author_username == "root"
    assert not event.from_fork


def test_note_on_an_mr_from_a_fork_is_marked() -> None:
    """A source project other than the target project means the MR comes from a fork."""
    data = payload("note_merge_request.json")
    data["merge_request"]["source_project_id"] = 99
    event = parse("Note Hook", data)
    assert isinstance(event, NoteEvent)
    assert event.from_fork


def test_note_on_a_commit_has_no_mr() -> None:
    """A comment on a commit parses, with no MR to act on."""
    event = parse("Note Hook", payload("note_commit.json"))
    assert isinstance(event, NoteEvent)
    assert event.mr_iid is None
    assert event.noteable_type == "Commit"


def test_deployment_full_sha_comes_from_commit_url() -> None:
    """The deployment payload has only short_sha; the full SHA is the tail of commit_url."""
    event = parse("Deployment Hook", payload("deployment.json"))
    assert isinstance(event, DeploymentEvent)
    assert event.sha == "279484c09fbe69ededfced8c1bb6e6d24616b468"
    assert (event.status, event.short_sha, event.environment) == ("success", "279484c0", "staging")


@pytest.mark.parametrize(
    ("event_type", "name", "mutate", "reason"),
    [
        (
            "Pipeline Hook",
            "pipeline.json",
            lambda d: d["object_attributes"].update(id="31"),
            "object_attributes.id: expected int, got str",
        ),
        (
            "Pipeline Hook",
            "pipeline.json",
            lambda d: d["object_attributes"].update(id=True),
            "object_attributes.id",
        ),
        (
            "Note Hook",
            "note_merge_request.json",
            lambda d: d.pop("merge_request"),
            "merge_request: missing",
        ),
        ("Merge Request Hook", "pipeline.json", lambda d: None, "does not match"),
        ("Deployment Hook", "deployment.json", lambda d: d.pop("project"), "project"),
    ],
)
def test_missing_or_mistyped_fields_are_unusable(
    event_type: str, name: str, mutate: Any, reason: str
) -> None:
    """A payload without what the bot needs is refused with a reason naming the field."""
    data = payload(name)
    mutate(data)
    with pytest.raises(Unusable, match=reason):
        parse(event_type, data)


#: Every id the bot reads from a payload: (event, fixture, path to the id, largest allowed).
IDS = [
    (
        "Merge Request Hook",
        "merge_request.json",
        ("object_attributes", "target_project_id"),
        2**31 - 1,
    ),
    ("Merge Request Hook", "merge_request.json", ("object_attributes", "iid"), 2**31 - 1),
    ("Pipeline Hook", "pipeline.json", ("project", "id"), 2**31 - 1),
    ("Pipeline Hook", "pipeline.json", ("object_attributes", "id"), 2**63 - 1),
    ("Pipeline Hook", "pipeline.json", ("merge_request", "iid"), 2**31 - 1),
    ("Note Hook", "note_merge_request.json", ("project", "id"), 2**31 - 1),
    ("Note Hook", "note_merge_request.json", ("object_attributes", "id"), 2**63 - 1),
    ("Note Hook", "note_merge_request.json", ("user", "id"), 2**63 - 1),
    ("Note Hook", "note_merge_request.json", ("merge_request", "iid"), 2**31 - 1),
    ("Note Hook", "note_merge_request.json", ("merge_request", "author_id"), 2**63 - 1),
    ("Note Hook", "note_merge_request.json", ("merge_request", "source_project_id"), 2**31 - 1),
    ("Note Hook", "note_merge_request.json", ("merge_request", "target_project_id"), 2**31 - 1),
    ("Deployment Hook", "deployment.json", ("project", "id"), 2**31 - 1),
    ("Deployment Hook", "deployment.json", ("deployment_id",), 2**63 - 1),
]


def _set(data: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


@pytest.mark.parametrize(("event_type", "name", "path", "top"), IDS)
def test_ids_out_of_the_databases_range_are_unusable(
    event_type: str, name: str, path: tuple[str, ...], top: int
) -> None:
    """An id of 0, a negative one, or one past its column (32-bit project ids and MR iids,
    64-bit note, pipeline, deployment and user ids) makes the delivery Unusable, naming it;
    1 and the largest value the column holds parse."""
    for good in (1, top):
        data = payload(name)
        _set(data, path, good)
        assert parse(event_type, data) is not None
    for bad in (0, -1, top + 1, 10**40):
        data = payload(name)
        _set(data, path, bad)
        with pytest.raises(Unusable, match=rf"{path[-1]}: out of range \(1\.\.{top}\)"):
            parse(event_type, data)


def test_a_huge_id_is_shown_shortened_in_the_reason() -> None:
    """A 4,000-digit iid is quarantined with a short reason, not the number itself."""
    data = payload("merge_request.json")
    data["object_attributes"]["iid"] = 10**4000
    with pytest.raises(Unusable) as caught:
        parse("Merge Request Hook", data)
    assert "(4001 digits)" in str(caught.value)
    assert len(str(caught.value)) < 120


def test_a_merge_commit_sha_longer_than_its_column_is_unusable() -> None:
    """merge_commit_sha past 64 characters (the column's width) is refused, not stored."""
    data = payload("merge_request.json")
    data["object_attributes"]["merge_commit_sha"] = "a" * 65
    with pytest.raises(Unusable, match="merge_commit_sha: longer than 64"):
        parse("Merge Request Hook", data)
