"""The double's merge trains: the Merge Trains API, a train per target branch, cars that merge
when their merge result's pipeline passes and leave when it fails, as GitLab does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from sim.gitlab import Access, GitLabDouble
from tests.double import START, Clock

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4"
PROJECT = "platform/config"
P = f"{API}/projects/platform%2Fconfig"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def double(clock: Clock) -> GitLabDouble:
    """A Premium project with merge trains on, one approval needed, a bot and a maintainer."""
    d = GitLabDouble(URL, clock=clock)
    d.add_project(PROJECT, files={"a.txt": "a\n"}, required_approvals=1, protect_default=False)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.add_user("alice", token="alice-token", access={PROJECT: Access.MAINTAINER})
    d.add_user("rita", token="rita-token", access={PROJECT: Access.REPORTER})
    d.add_hook(PROJECT, "http://bot.test/hook", events=["merge_requests_events", "pipeline_events"])
    d.set_merge_trains(PROJECT)
    return d


@pytest.fixture(autouse=True)
def mock(double: GitLabDouble) -> Iterator[responses.RequestsMock]:
    with double.mocked(URL) as mocked:
        yield mocked


def call(method: str, path: str, token: str = "bot-token", **kw: Any) -> requests.Response:
    return requests.request(method, f"{P}{path}", headers={"PRIVATE-TOKEN": token}, timeout=5, **kw)


def ready(
    double: GitLabDouble, branch: str, files: dict[str, str] | None = None, *, remove: bool = False
) -> int:
    """An MR from `branch` whose pipeline passed and which alice approved: mergeable."""
    mr = double.open_mr(PROJECT, branch, author="bot", files=files, remove_source_branch=remove)
    iid = mr.iid
    double.set_pipeline(PROJECT, mr_pipeline(double, iid), "success")
    double.approve_as(PROJECT, iid, "alice")
    return iid


def add(iid: int, **data: Any) -> requests.Response:
    return call("POST", f"/merge_trains/merge_requests/{iid}", json=data)


def mr_pipeline(double: GitLabDouble, iid: int) -> int:
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    return pipeline.id


def car_pipeline(double: GitLabDouble, iid: int) -> int:
    car = double.train_car(PROJECT, iid)
    assert car is not None
    assert car.pipeline_id is not None
    return car.pipeline_id


def system_notes(double: GitLabDouble, iid: int) -> list[str]:
    return [n.body for n in double.mr(PROJECT, iid).notes.values() if n.system]


def merge_hooks(double: GitLabDouble) -> list[int]:
    """The iids of the MR Hooks with action "merge" sent since the last call."""
    return [
        d.payload["object_attributes"]["iid"]
        for d in double.take_outgoing()
        if d.kind == "merge_request" and d.payload["object_attributes"]["action"] == "merge"
    ]


# -- the project's settings -----------------------------------------------------------------


def test_project_shows_merge_trains_only_with_merged_results_pipelines(
    double: GitLabDouble,
) -> None:
    """`merge_trains_enabled` is GitLab's computed value: both settings on; off by default."""
    assert call("GET", "").json()["merge_trains_enabled"] is True
    double.project(PROJECT).merge_pipelines_enabled = False
    body = call("GET", "").json()
    assert (body["merge_pipelines_enabled"], body["merge_trains_enabled"]) == (False, False)
    double.add_project("platform/other", protect_default=False)
    other = requests.get(
        f"{API}/projects/platform%2Fother", headers={"PRIVATE-TOKEN": "bot-token"}, timeout=5
    ).json()
    assert other["merge_trains_enabled"] is False


def test_free_or_ce_has_no_merge_train_fields_and_api_is_403(double: GitLabDouble) -> None:
    """Without the licence the fields are absent and the Merge Trains API answers 403."""
    double.edition = "ce"
    iid = ready(double, "change-1")
    body = call("GET", "").json()
    assert "merge_trains_enabled" not in body
    assert "merge_pipelines_enabled" not in body
    assert add(iid).status_code == 403
    assert call("GET", f"/merge_trains/merge_requests/{iid}").status_code == 403
    assert call("GET", "/merge_trains").status_code == 403


# -- adding ---------------------------------------------------------------------------------


def test_add_boards_the_train_with_a_pipeline_on_the_merge_result(double: GitLabDouble) -> None:
    """201 and the whole train; the car has a pipeline on its merge result with the target."""
    iid = ready(double, "change-1")
    target = double.branch_head(PROJECT, "main")
    head = double.mr(PROJECT, iid).sha

    answer = add(iid, sha=head, auto_merge=True)

    assert answer.status_code == 201
    (listed,) = answer.json()
    assert (listed["merge_request"]["iid"], listed["status"]) == (iid, "fresh")
    assert listed["pipeline"]["ref"] == f"refs/merge-requests/{iid}/train"
    assert listed["pipeline"]["status"] == "running"
    result = double.state.commits[listed["pipeline"]["sha"]]
    assert result.parents == (target, head)
    assert (
        double.file(PROJECT, "changes/change-1.txt", ref=listed["pipeline"]["sha"]) == "change-1\n"
    )
    assert double.mr(PROJECT, iid).auto_merge
    assert call("GET", f"/merge_requests/{iid}").json()["merge_when_pipeline_succeeds"] is True
    assert system_notes(double, iid) == ["started a merge train"]
    assert double.branch_head(PROJECT, "main") == target  # nothing merged yet


def test_second_car_tests_both_changes(double: GitLabDouble) -> None:
    """The second car's merge result is built on the first car's: position 2 in the notes."""
    first, second = ready(double, "change-1"), ready(double, "change-2")
    add(first)
    answer = add(second)
    assert [c["merge_request"]["iid"] for c in answer.json()] == [second, first]  # desc
    assert system_notes(double, second) == [
        "added this merge request to the merge train at position 2"
    ]
    one, two = double.train(PROJECT)
    assert two.base_sha == one.train_sha
    tree = double.state.commits[str(two.train_sha)].tree
    assert {"changes/change-1.txt", "changes/change-2.txt"} <= set(tree)


def test_sha_mismatch_is_409_with_the_head(double: GitLabDouble) -> None:
    """GitLab's check_sha_param!: 409 naming the head; nothing boards."""
    iid = ready(double, "change-1")
    answer = add(iid, sha="0" * 40)
    assert answer.status_code == 409
    assert answer.json()["message"] == (
        f"SHA does not match HEAD of source branch: {double.mr(PROJECT, iid).sha}"
    )
    assert double.train(PROJECT) == []


def test_adding_twice_is_409_already_set(double: GitLabDouble) -> None:
    """A second add (on the train, or waiting to join) is 409 "already set to Auto-Merge"."""
    iid = ready(double, "change-1")
    assert add(iid).status_code == 201
    answer = add(iid)
    assert (answer.status_code, answer.json()["message"]) == (
        409,
        "Merge request is already set to Auto-Merge",
    )
    assert len(double.train(PROJECT)) == 1


def test_trains_off_is_400_not_enabled(double: GitLabDouble) -> None:
    """Premium but merge trains off in the settings: 400 with GitLab's reason."""
    double.set_merge_trains(PROJECT, enabled=False)
    answer = add(ready(double, "change-1"))
    assert (answer.status_code, answer.json()["message"]) == (
        400,
        "400 Bad request - Merge trains are not enabled for this project",
    )


def test_not_mergeable_without_auto_merge_is_400_no_strategy(double: GitLabDouble) -> None:
    """Not approved and no auto_merge: 400 "No available merge train strategy"."""
    iid = double.open_mr(PROJECT, "change-1", author="bot").iid
    answer = add(iid)
    assert (answer.status_code, answer.json()["message"]) == (
        400,
        "400 Bad request - No available merge train strategy",
    )
    assert not double.mr(PROJECT, iid).auto_merge


def test_conflict_is_400_even_with_auto_merge(double: GitLabDouble) -> None:
    """A conflict is not a check that can pass: 400."""
    iid = ready(double, "change-1")
    double.set_conflict(PROJECT, iid)
    assert add(iid, auto_merge=True).status_code == 400


def test_auto_merge_waits_for_the_pipeline_then_boards(double: GitLabDouble) -> None:
    """202 while the MR pipeline runs; the car appears when it passes."""
    iid = double.open_mr(PROJECT, "change-1", author="bot").iid
    double.approve_as(PROJECT, iid, "alice")

    answer = add(iid, auto_merge=True)

    assert (answer.status_code, answer.json()) == (202, [])
    assert call("GET", f"/merge_trains/merge_requests/{iid}").status_code == 404
    assert double.mr(PROJECT, iid).auto_merge
    double.set_pipeline(PROJECT, mr_pipeline(double, iid), "success")
    car = double.train_car(PROJECT, iid)
    assert car is not None
    assert car.status == "fresh"
    assert system_notes(double, iid)[-1] == "started a merge train"


def test_auto_merge_waits_for_approval_then_boards(double: GitLabDouble) -> None:
    """202 while approvals are missing (the deprecated when_pipeline_succeeds works too)."""
    iid = double.open_mr(PROJECT, "change-1", author="bot").iid
    double.set_pipeline(PROJECT, mr_pipeline(double, iid), "success")
    assert add(iid, when_pipeline_succeeds=True).status_code == 202
    double.approve_as(PROJECT, iid, "alice")
    assert double.train_car(PROJECT, iid) is not None


def test_refusals_by_role_and_protection(double: GitLabDouble) -> None:
    """Below Developer: 403 (the API); may not merge into a protected target: 401."""
    iid = ready(double, "change-1")
    assert add_as(iid, "rita-token").status_code == 403
    double.protect_branch(PROJECT, "main", push=[Access.MAINTAINER], merge=[Access.MAINTAINER])
    assert add(iid).status_code == 401
    assert add_as(iid, "alice-token").status_code == 201


def add_as(iid: int, token: str) -> requests.Response:
    return call("POST", f"/merge_trains/merge_requests/{iid}", token=token, json={})


# -- following the train --------------------------------------------------------------------


def test_first_car_merges_when_its_pipeline_passes(double: GitLabDouble) -> None:
    """The target moves to the merge result, the MR is merged with its MR Hook (its source branch
    removed as asked), the car stays."""
    iid = ready(double, "change-1", remove=True)
    add(iid)
    double.take_outgoing()
    car = double.train_car(PROJECT, iid)
    assert car is not None

    double.set_pipeline(PROJECT, car_pipeline(double, iid), "success")

    mr = double.mr(PROJECT, iid)
    assert (mr.state, mr.auto_merge) == ("merged", False)
    assert double.branch_head(PROJECT, "main") == car.train_sha == mr.merge_commit_sha
    assert double.branch_head(PROJECT, "change-1") is None
    assert merge_hooks(double) == [iid]
    body = call("GET", f"/merge_trains/merge_requests/{iid}").json()
    assert (body["status"], body["merge_request"]["state"]) == ("merged", "merged")
    assert body["merged_at"] is not None
    assert double.train(PROJECT) == []


def test_a_follower_waits_for_the_car_ahead(double: GitLabDouble) -> None:
    """A follower whose pipeline passed first merges right after the car ahead, no rebuild."""
    first, second = ready(double, "change-1"), ready(double, "change-2")
    add(first)
    add(second)
    second_pipeline = car_pipeline(double, second)
    double.take_outgoing()

    double.set_pipeline(PROJECT, second_pipeline, "success")
    assert double.mr(PROJECT, second).state == "opened"
    double.set_pipeline(PROJECT, car_pipeline(double, first), "success")

    assert merge_hooks(double) == [first, second]
    assert car_pipeline(double, second) == second_pipeline
    car = double.train_car(PROJECT, second)
    assert car is not None
    assert double.branch_head(PROJECT, "main") == car.train_sha


def test_a_failed_car_leaves_and_the_cars_behind_restart(double: GitLabDouble) -> None:
    """GitLab's abort: car gone (404), a system note, auto-merge off; the car behind gets a new
    merge result on the car ahead of the dropped one, and a new pipeline (the old canceled)."""
    a, b, c = ready(double, "change-a"), ready(double, "change-b"), ready(double, "change-c")
    for iid in (a, b, c):
        add(iid)
    old_c = car_pipeline(double, c)

    double.set_pipeline(PROJECT, car_pipeline(double, b), "failed")

    answer = call("GET", f"/merge_trains/merge_requests/{b}")
    assert (answer.status_code, answer.json()["message"]) == (
        404,
        "404 Merge Train Merge Request Not Found",
    )
    assert system_notes(double, b)[-1] == (
        "removed this merge request from the merge train because pipeline did not succeed"
    )
    assert not double.mr(PROJECT, b).auto_merge
    first, third = double.train(PROJECT)
    assert (first.mr_iid, third.mr_iid) == (a, c)
    assert third.base_sha == first.train_sha
    assert third.pipeline_id != old_c
    assert double.project(PROJECT).pipelines[old_c].status == "canceled"
    tree = double.state.commits[str(third.train_sha)].tree
    assert "changes/change-b.txt" not in tree
    # the train goes on
    double.set_pipeline(PROJECT, car_pipeline(double, a), "success")
    double.set_pipeline(PROJECT, car_pipeline(double, c), "success")
    assert [double.mr(PROJECT, i).state for i in (a, b, c)] == ["merged", "opened", "merged"]


def test_the_dropped_mr_can_board_again(double: GitLabDouble) -> None:
    """After a drop the MR may be added again (a new car, a new pipeline)."""
    iid = ready(double, "change-1")
    add(iid)
    double.set_pipeline(PROJECT, car_pipeline(double, iid), "failed")
    assert add(iid).status_code == 201
    assert double.train_car(PROJECT, iid) is not None


def test_a_push_to_the_source_branch_drops_the_car(double: GitLabDouble) -> None:
    """A new head leaves the train: "source branch was updated"."""
    iid = ready(double, "change-1")
    add(iid)
    pipeline = car_pipeline(double, iid)
    double.push(PROJECT, "change-1", {"b.txt": "b\n"}, author="bot")
    assert double.train_car(PROJECT, iid) is None
    assert double.project(PROJECT).pipelines[pipeline].status == "canceled"
    assert system_notes(double, iid)[-1] == (
        "removed this merge request from the merge train because source branch was updated"
    )


def test_a_push_aborts_a_waiting_auto_merge(double: GitLabDouble) -> None:
    """Waiting to join (202) and the head moves: auto-merge is aborted."""
    iid = double.open_mr(PROJECT, "change-1", author="bot").iid
    add(iid, auto_merge=True)
    double.push(PROJECT, "change-1", {"b.txt": "b\n"}, author="bot")
    assert not double.mr(PROJECT, iid).auto_merge
    assert (
        system_notes(double, iid)[-1]
        == "aborted the automatic merge because source branch was updated"
    )


def test_a_conflict_with_the_car_ahead_drops_the_car(double: GitLabDouble) -> None:
    """Both change a.txt: the second car's merge result cannot be built."""
    first = ready(double, "change-1", files={"a.txt": "one\n"})
    second = ready(double, "change-2", files={"a.txt": "two\n"})
    add(first)
    add(second)
    assert double.train_car(PROJECT, second) is None
    assert system_notes(double, second)[-1] == (
        "removed this merge request from the merge train because Conflicts detected during merge"
    )


def test_train_pipelines_are_clocked_like_mr_pipelines(double: GitLabDouble, clock: Clock) -> None:
    """With pipeline_seconds, run_due finishes the train pipelines and the cars merge in turn."""
    double.pipeline_seconds = 300
    first, second = ready(double, "change-1"), ready(double, "change-2")
    add(first)
    clock.now += timedelta(seconds=10)
    add(second)
    assert double.next_due() == START + timedelta(seconds=300)
    clock.now = START + timedelta(seconds=300)
    assert double.run_due() == 1
    assert (double.mr(PROJECT, first).state, double.mr(PROJECT, second).state) == (
        "merged",
        "opened",
    )
    clock.now += timedelta(seconds=10)
    assert double.run_due() == 1
    assert double.mr(PROJECT, second).state == "merged"
    assert double.next_due() is None


def test_auto_success_pipelines_merge_during_the_add(double: GitLabDouble) -> None:
    """With new pipelines passing at once, the add answers 201 and the MR is merged already."""
    iid = ready(double, "change-1")
    double.new_pipeline_status = "success"
    answer = add(iid)
    assert answer.status_code == 201
    assert answer.json()[0]["status"] == "merged"
    assert double.mr(PROJECT, iid).state == "merged"


# -- lists and shapes -----------------------------------------------------------------------


def test_lists_filter_by_scope_branch_and_sort(double: GitLabDouble) -> None:
    """scope active/complete, sort asc/desc, per target branch."""
    first, second = ready(double, "change-1"), ready(double, "change-2")
    add(first)
    add(second)
    double.set_pipeline(PROJECT, car_pipeline(double, first), "success")

    def iids(path: str) -> list[int]:
        answer = call("GET", path)
        assert answer.status_code == 200
        return [c["merge_request"]["iid"] for c in answer.json()]

    assert iids("/merge_trains") == [second, first]
    assert iids("/merge_trains?sort=asc") == [first, second]
    assert iids("/merge_trains?scope=active") == [second]
    assert iids("/merge_trains?scope=complete") == [first]
    assert iids("/merge_trains/main?scope=active") == [second]
    assert iids("/merge_trains/other") == []
    assert call("GET", "/merge_trains?scope=everything").status_code == 400


def _keys(name: str) -> dict[str, Any]:
    parsed: Any = json.loads((FIXTURES / name).read_text())
    return parsed[0] if isinstance(parsed, list) else parsed


@pytest.mark.parametrize("fixture", ["merge_train_car.json", "merge_trains.json"])
def test_car_keeps_the_documented_shape(double: GitLabDouble, fixture: str) -> None:
    """A car has the documented keys (doc/api/merge_trains.md), nested ones included."""
    iid = ready(double, "change-1")
    add(iid)
    ours = call("GET", f"/merge_trains/merge_requests/{iid}").json()
    documented = _keys(fixture)
    assert set(ours) == set(documented)
    assert set(ours["merge_request"]) == set(documented["merge_request"])
    assert set(ours["user"]) >= set(documented["user"])
    assert set(ours["pipeline"]) >= set(documented["pipeline"])


def test_a_push_to_the_target_rebuilds_the_train(double: GitLabDouble) -> None:
    """The target moved outside the train: the first car's merge result is rebuilt on it."""
    iid = ready(double, "change-1")
    add(iid)
    old = car_pipeline(double, iid)
    head = double.advance_branch(PROJECT, "main")
    car = double.train_car(PROJECT, iid)
    assert car is not None
    assert (car.base_sha, car.status) == (head, "fresh")
    assert car.pipeline_id != old
    assert double.project(PROJECT).pipelines[old].status == "canceled"
