"""bot/gitlab/trains.py: merge trains against the GitLab double (every outcome, call counts), and
against GitLab's documented answers (tests/fixtures/merge_train*.json, from GitLab's
doc/api/merge_trains.md) for what the double does not show: a car still idle, older wording,
a 5xx after the add."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from bot.gitlab import (
    Account,
    GitLabUnavailable,
    MrClosed,
    NotFound,
    Project,
    TrainCar,
    TrainOutcome,
    TrainState,
    Unauthorized,
    add_to_train,
    close_mr,
    follow_train,
    make_client,
    read_mr,
    train_car,
    uses_merge_trains,
)
from sim.gitlab import Access, GitLabDouble
from tests.adapters.test_gitlab_harness import SHA, P, account, calls, mock_gitlab, mr_json

URL = "https://gitlab.example.com"
PROJECT = "platform/config"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def double() -> Iterator[GitLabDouble]:
    """A Premium project with merge trains on and one approval needed; the author bot (it
    merges), an approver; mounted on responses."""
    gl = GitLabDouble(URL, mode="new")
    gl.add_project(
        PROJECT,
        files={"config/prod.yaml": "replicas: 1\n"},
        required_approvals=1,
        protect_default=False,
    )
    gl.add_user("gitops-bot", token="author-token", access={PROJECT: Access.DEVELOPER})
    gl.add_user("approver-1", token="approver-1-token", access={PROJECT: Access.MAINTAINER})
    gl.set_merge_trains(PROJECT)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gl.mount(rsps, base_url=URL)
        yield gl


@pytest.fixture
def bot(double: GitLabDouble) -> Project:
    """The project as the author bot sees it."""
    return Account(make_client(URL, "author-token", timeout=5.0), "author").project(PROJECT)


def opened(
    double: GitLabDouble, branch: str = "gitops/op-1", path: str = "config/prod.yaml"
) -> tuple[int, str]:
    """The bot's MR changing `path` (its pipeline running, not approved): (iid, head sha)."""
    mr = double.open_mr(PROJECT, branch, author="gitops-bot", files={path: f"{branch}\n"})
    return mr.iid, mr.sha


def pass_pipeline(double: GitLabDouble, iid: int) -> None:
    pipeline = double.latest_pipeline(PROJECT, iid)
    assert pipeline is not None
    double.set_pipeline(PROJECT, pipeline.id, "success")


def ready(
    double: GitLabDouble, branch: str = "gitops/op-1", path: str = "config/prod.yaml"
) -> tuple[int, str]:
    """The bot's MR, its pipeline passed and approved: mergeable."""
    iid, sha = opened(double, branch, path)
    pass_pipeline(double, iid)
    double.approve_as(PROJECT, iid, "approver-1")
    return iid, sha


def car_pipeline(double: GitLabDouble, iid: int) -> int:
    car = double.train_car(PROJECT, iid)
    assert car is not None
    assert car.pipeline_id is not None
    return car.pipeline_id


# -- uses_merge_trains ----------------------------------------------------------------------


def test_uses_merge_trains_reads_the_project_once(double: GitLabDouble, bot: Project) -> None:
    """On with both settings; one GET."""
    double.clear_calls()
    assert uses_merge_trains(bot) is True
    assert [(c.method, c.path) for c in double.calls] == [("GET", "/projects/platform/config")]


def test_uses_merge_trains_off_in_the_settings(double: GitLabDouble, bot: Project) -> None:
    """Premium with merge trains (or merged results pipelines) off: False."""
    double.project(PROJECT).merge_pipelines_enabled = False
    assert uses_merge_trains(bot) is False
    double.set_merge_trains(PROJECT, enabled=False)
    assert uses_merge_trains(bot) is False


def test_uses_merge_trains_absent_on_free_or_ce(double: GitLabDouble, bot: Project) -> None:
    """Without the licence GitLab does not show the field at all: False."""
    double.edition = "ce"
    assert uses_merge_trains(bot) is False


# -- add_to_train: every outcome ------------------------------------------------------------


def test_added_in_one_call(double: GitLabDouble, bot: Project) -> None:
    """A mergeable MR: one POST pinned to the sha with auto_merge, 201, its car on the train."""
    iid, sha = ready(double)
    double.clear_calls()

    result = add_to_train(bot, iid, sha)

    assert result.outcome is TrainOutcome.ADDED
    assert result.status_code == 201
    assert result.car is not None
    assert (result.car.iid, result.car.status, result.car.active) == (iid, "fresh", True)
    assert result.car.pipeline_status == "running"
    (post,) = train_calls(double)
    assert (post.method, post.path) == (
        "POST",
        f"/projects/{PROJECT}/merge_trains/merge_requests/{iid}",
    )
    # the double answers GET /version as 17.5: when_pipeline_succeeds (auto_merge from 17.11)
    assert post.body == {"sha": sha, "when_pipeline_succeeds": True}
    assert (post.status, post.user) == (201, "gitops-bot")


def test_queued_while_the_pipeline_runs(double: GitLabDouble, bot: Project) -> None:
    """Approved, pipeline running: 202 QUEUED; it boards once the pipeline passes."""
    iid, sha = opened(double)
    double.approve_as(PROJECT, iid, "approver-1")

    result = add_to_train(bot, iid, sha)

    assert (result.outcome, result.status_code) == (TrainOutcome.QUEUED, 202)
    assert train_car(bot, iid) is None
    assert follow_train(bot, iid, sha).state is TrainState.QUEUED
    pass_pipeline(double, iid)
    assert follow_train(bot, iid, sha).state is TrainState.ON_TRAIN


def test_queued_until_approved(double: GitLabDouble, bot: Project) -> None:
    """Pipeline passed, approval missing: QUEUED; the approval boards it."""
    iid, sha = opened(double)
    pass_pipeline(double, iid)
    assert add_to_train(bot, iid, sha).outcome is TrainOutcome.QUEUED
    double.approve_as(PROJECT, iid, "approver-1")
    car = train_car(bot, iid)
    assert car is not None
    assert car.active


def test_already_on_the_train(double: GitLabDouble, bot: Project) -> None:
    """A repeat add: GitLab's 409 "already set to Auto-Merge", read back: ALREADY with the car
    (POST, MR, car: three calls)."""
    iid, sha = ready(double)
    add_to_train(bot, iid, sha)
    double.clear_calls()

    result = add_to_train(bot, iid, sha)

    assert (result.outcome, result.status_code) == (TrainOutcome.ALREADY, 409)
    assert result.car is not None
    assert result.car.active
    assert [(c.method, c.status) for c in double.calls] == [
        ("POST", 409),
        ("GET", 200),
        ("GET", 200),
    ]
    assert len(double.train(PROJECT)) == 1


def test_already_queued(double: GitLabDouble, bot: Project) -> None:
    """A repeat add while queued for checks: ALREADY, no car."""
    iid, sha = opened(double)
    double.approve_as(PROJECT, iid, "approver-1")
    add_to_train(bot, iid, sha)
    result = add_to_train(bot, iid, sha)
    assert (result.outcome, result.car) == (TrainOutcome.ALREADY, None)


def test_merged_already(double: GitLabDouble, bot: Project) -> None:
    """Merged (by the train, earlier): GitLab refuses (400), the read-back says MERGED."""
    iid, sha = ready(double)
    add_to_train(bot, iid, sha)
    double.set_pipeline(PROJECT, car_pipeline(double, iid), "success")

    result = add_to_train(bot, iid, sha)

    assert result.outcome is TrainOutcome.MERGED
    assert result.merge_commit_sha == double.branch_head(PROJECT, "main")


def test_a_merged_or_moved_mr_the_caller_read_makes_no_call(
    double: GitLabDouble, bot: Project
) -> None:
    """Given the MR just read: merged or on another head is decided without a call."""
    iid, sha = ready(double)
    mr = read_mr(bot, iid)
    double.clear_calls()
    assert add_to_train(bot, iid, "0" * 40, mr=mr).outcome is TrainOutcome.HEAD_MOVED
    add_to_train(bot, iid, sha, mr=mr)
    double.set_pipeline(PROJECT, car_pipeline(double, iid), "success")
    merged = read_mr(bot, iid)
    double.clear_calls()
    result = add_to_train(bot, iid, sha, mr=merged)
    assert (result.outcome, result.merge_commit_sha) == (
        TrainOutcome.MERGED,
        double.branch_head(PROJECT, "main"),
    )
    assert double.calls == []


def test_head_moved_is_409_in_one_call(double: GitLabDouble, bot: Project) -> None:
    """The head moved since the approval: 409 sha mismatch, HEAD_MOVED, nothing else read."""
    iid, sha = ready(double)
    double.push(PROJECT, "gitops/op-1", {"other.txt": "x\n"}, author="gitops-bot")
    double.clear_calls()

    result = add_to_train(bot, iid, sha)

    assert (result.outcome, result.status_code) == (TrainOutcome.HEAD_MOVED, 409)
    assert "SHA does not match HEAD of source branch" in result.detail
    assert len(train_calls(double)) == 1
    assert double.train(PROJECT) == []


def test_wait_while_the_pipeline_runs_without_auto_merge(
    double: GitLabDouble, bot: Project
) -> None:
    """Without auto_merge a running pipeline is refused (400); read back: WAIT with a delay."""
    iid, sha = opened(double)
    double.approve_as(PROJECT, iid, "approver-1")

    result = add_to_train(bot, iid, sha, auto_merge=False)

    assert (result.outcome, result.status_code) == (TrainOutcome.WAIT, 400)
    assert result.retry_in is not None
    assert result.detail.startswith("ci_still_running: ")
    assert "No available merge train strategy" in result.detail


def test_not_mergeable_when_not_approved(double: GitLabDouble, bot: Project) -> None:
    """Without auto_merge, not approved: NOT_MERGEABLE, the MR read back says not_approved."""
    iid, sha = opened(double)
    pass_pipeline(double, iid)

    result = add_to_train(bot, iid, sha, auto_merge=False)

    assert result.outcome is TrainOutcome.NOT_MERGEABLE
    assert result.mr is not None
    assert result.mr.detailed_merge_status == "not_approved"


def test_not_mergeable_on_conflict(double: GitLabDouble, bot: Project) -> None:
    """A conflict is not a check that passes, even with auto_merge."""
    iid, sha = ready(double)
    double.set_conflict(PROJECT, iid)
    result = add_to_train(bot, iid, sha)
    assert (result.outcome, result.detail.split(":")[0]) == (TrainOutcome.NOT_MERGEABLE, "conflict")


def test_refused_when_merge_trains_are_off(double: GitLabDouble, bot: Project) -> None:
    """Premium, trains off: 400 "not enabled", REFUSED in one call (merge without a train)."""
    double.set_merge_trains(PROJECT, enabled=False)
    iid, sha = ready(double)
    double.clear_calls()
    result = add_to_train(bot, iid, sha)
    assert (result.outcome, result.status_code) == (TrainOutcome.REFUSED, 400)
    assert "Merge trains are not enabled for this project" in result.detail
    assert len(train_calls(double)) == 1


def test_refused_without_the_licence(double: GitLabDouble, bot: Project) -> None:
    """Free or CE: the Merge Trains API answers 403: REFUSED."""
    double.edition = "ce"
    iid, sha = ready(double)
    result = add_to_train(bot, iid, sha)
    assert (result.outcome, result.status_code) == (TrainOutcome.REFUSED, 403)


def test_may_not_merge_into_the_target_raises(double: GitLabDouble, bot: Project) -> None:
    """401 (the bot may not merge into a protected target) is configuration: it raises."""
    double.protect_branch(PROJECT, "main", push=[Access.MAINTAINER], merge=[Access.MAINTAINER])
    iid, sha = ready(double)
    with pytest.raises(Unauthorized):
        add_to_train(bot, iid, sha)


def test_closed_mr_raises(double: GitLabDouble, bot: Project) -> None:
    """A closed MR is refused (400) and read back closed: MrClosed, as merge does."""
    iid, sha = ready(double)
    assert close_mr(bot, iid)
    with pytest.raises(MrClosed):
        add_to_train(bot, iid, sha)


def test_lost_answer_is_read_back_as_added(double: GitLabDouble, bot: Project) -> None:
    """The add happened but its answer timed out: the read-back finds the car (ADDED)."""
    iid, sha = ready(double)
    double.fail_next(1, "timeout", methods="POST", path_contains="/merge_trains/")
    result = add_to_train(bot, iid, sha)
    assert result.outcome is TrainOutcome.ADDED
    assert result.car is not None
    assert len(double.train(PROJECT)) == 1


def test_lost_answer_of_an_add_that_did_not_happen_waits(
    double: GitLabDouble, bot: Project
) -> None:
    """Timed out before GitLab added it: WAIT (call again), never a second car."""
    iid, sha = ready(double)
    double.fail_next(1, "timeout", methods="POST", path_contains="/merge_trains/", apply=False)
    result = add_to_train(bot, iid, sha)
    assert (result.outcome, result.detail) == (TrainOutcome.WAIT, "add answer lost")
    assert add_to_train(bot, iid, sha).outcome is TrainOutcome.ADDED


def test_5xx_without_an_add_raises_for_a_retry(double: GitLabDouble, bot: Project) -> None:
    """A 502 and nothing shows the MR added: a transient error (the caller retries)."""
    iid, sha = ready(double)
    double.fail_next(1, 502, methods="POST", path_contains="/merge_trains/")
    with pytest.raises(GitLabUnavailable):
        add_to_train(bot, iid, sha)
    assert double.train(PROJECT) == []


# -- train_car and follow_train -------------------------------------------------------------


def test_train_car_none_before_and_after(double: GitLabDouble, bot: Project) -> None:
    """None before the add and after a drop; a missing MR still raises NotFound."""
    iid, sha = ready(double)
    assert train_car(bot, iid) is None
    add_to_train(bot, iid, sha)
    car = train_car(bot, iid)
    assert car is not None
    assert car.pipeline_id == car_pipeline(double, iid)
    double.set_pipeline(PROJECT, car_pipeline(double, iid), "failed")
    assert train_car(bot, iid) is None
    with pytest.raises(NotFound):
        train_car(bot, 999)


def test_follow_until_merged(double: GitLabDouble, bot: Project) -> None:
    """ON_TRAIN (one call) while the pipeline runs; MERGED with the target's new head."""
    iid, sha = ready(double)
    add_to_train(bot, iid, sha)
    double.clear_calls()
    progress = follow_train(bot, iid, sha)
    assert progress.state is TrainState.ON_TRAIN
    assert progress.detail == "fresh, pipeline running"
    assert progress.retry_in is not None
    assert len(double.calls) == 1

    double.set_pipeline(PROJECT, car_pipeline(double, iid), "success")
    done = follow_train(bot, iid, sha)

    assert done.state is TrainState.MERGED
    assert done.car is not None
    assert done.car.merged
    assert done.merge_commit_sha == double.branch_head(PROJECT, "main")


def test_follow_a_dropped_car_gives_gitlabs_reason(double: GitLabDouble, bot: Project) -> None:
    """The car's pipeline failed: DROPPED with the system note's reason (three calls)."""
    iid, sha = ready(double)
    add_to_train(bot, iid, sha)
    double.set_pipeline(PROJECT, car_pipeline(double, iid), "failed")
    double.clear_calls()

    progress = follow_train(bot, iid, sha)

    assert (progress.state, progress.detail) == (TrainState.DROPPED, "pipeline did not succeed")
    assert len(double.calls) == 3


def test_follow_after_a_push_is_head_moved(double: GitLabDouble, bot: Project) -> None:
    """Someone pushed to the MR on the train: it left, and its head is not ours."""
    iid, sha = ready(double)
    add_to_train(bot, iid, sha)
    double.push(PROJECT, "gitops/op-1", {"other.txt": "x\n"}, author="approver-1")
    assert follow_train(bot, iid, sha).state is TrainState.HEAD_MOVED
    progress = follow_train(bot, iid)  # without the sha: dropped, with GitLab's reason
    assert (progress.state, progress.detail) == (TrainState.DROPPED, "source branch was updated")


def test_two_changes_merge_in_train_order(double: GitLabDouble, bot: Project) -> None:
    """Two MRs on one train: the second's result holds both; each merges when first and green."""
    first, first_sha = ready(double, "gitops/op-1")
    second, second_sha = ready(double, "gitops/op-2", "config/staging.yaml")
    assert add_to_train(bot, first, first_sha).outcome is TrainOutcome.ADDED
    assert add_to_train(bot, second, second_sha).outcome is TrainOutcome.ADDED

    double.set_pipeline(PROJECT, car_pipeline(double, second), "success")
    assert follow_train(bot, second, second_sha).state is TrainState.ON_TRAIN  # not first yet
    double.set_pipeline(PROJECT, car_pipeline(double, first), "success")

    assert follow_train(bot, first, first_sha).state is TrainState.MERGED
    assert follow_train(bot, second, second_sha).state is TrainState.MERGED


# -- GitLab's documented answers ------------------------------------------------------------


def _fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


CAR = f"{P}/merge_trains/merge_requests/7"
MR = f"{P}/merge_requests/7"


def test_documented_cars_parse() -> None:
    """The documented car (idle, pipeline pending) and a merged one from the list."""
    idle = TrainCar.from_json(_fixture("merge_train_car.json"))
    assert (idle.id, idle.iid, idle.status, idle.target_branch) == (267, 1, "idle", "main")
    assert (idle.pipeline_id, idle.pipeline_status, idle.active, idle.merged) == (
        273,
        "pending",
        True,
        False,
    )
    assert idle.pipeline_running
    (merged,) = (TrainCar.from_json(row) for row in _fixture("merge_trains.json"))
    assert (merged.status, merged.merged, merged.active, merged.pipeline_running) == (
        "merged",
        True,
        False,
        False,
    )
    assert merged.merged_at is not None


def _car(**kw: Any) -> dict[str, Any]:
    car: dict[str, Any] = _fixture("merge_train_car.json")
    car["merge_request"]["iid"] = 7
    car.update(kw)
    return car


def test_added_with_an_idle_car_not_started_yet() -> None:
    """GitLab answers 201 before its refresh job ran: the car is idle, without a pipeline."""
    with mock_gitlab() as rsps:
        rsps.add(responses.POST, CAR, status=201, json=[_car(pipeline=None)])
        result = add_to_train(account().project(42), 7, SHA)
    assert result.outcome is TrainOutcome.ADDED
    assert result.car is not None
    assert (result.car.status, result.car.pipeline_id, result.car.pipeline_running) == (
        "idle",
        None,
        True,
    )


def test_already_in_older_wording_400() -> None:
    """GitLab answering the repeat with 400 "... already set to Auto-Merge": read back, ALREADY."""
    message = "400 Bad request - Merge request is already set to Auto-Merge"
    with mock_gitlab() as rsps:
        rsps.add(responses.POST, CAR, status=400, json={"message": message})
        rsps.add(responses.GET, MR, json=mr_json(merge_when_pipeline_succeeds=True))
        rsps.add(responses.GET, CAR, json=_car(status="fresh"))
        result = add_to_train(account().project(42), 7, SHA)
        assert calls(rsps) == [
            "GET /version",  # once per process: which parameter joins when checks pass
            "POST /projects/42/merge_trains/merge_requests/7",
            "GET /projects/42/merge_requests/7",
            "GET /projects/42/merge_trains/merge_requests/7",
        ]
    assert (result.outcome, result.status_code) == (TrainOutcome.ALREADY, 400)


def test_5xx_after_the_add_is_read_back_as_added() -> None:
    """A 502 after GitLab added it: the read-back finds the car, ADDED, nothing raised."""
    with mock_gitlab() as rsps:
        rsps.add(responses.POST, CAR, status=502, json={"message": "502 Bad Gateway"})
        rsps.add(responses.GET, MR, json=mr_json(merge_when_pipeline_succeeds=True))
        rsps.add(responses.GET, CAR, json=_car(status="fresh"))
        result = add_to_train(account().project(42), 7, SHA)
    assert result.outcome is TrainOutcome.ADDED


def test_train_car_404_for_the_mr_raises() -> None:
    """Only GitLab's "Merge Train Merge Request Not Found" means no car; another 404 raises."""
    project = account().project(42)
    with mock_gitlab() as rsps:
        rsps.add(
            responses.GET,
            CAR,
            status=404,
            json={"message": "404 Merge Train Merge Request Not Found"},
        )
        rsps.add(responses.GET, CAR, status=404, json={"message": "404 Merge Request Not Found"})
        assert train_car(project, 7) is None
        with pytest.raises(NotFound):
            train_car(project, 7)


def test_no_call_sleeps_or_hangs() -> None:
    """The module's calls go through the client (its timeout, no sleeping): a timeout on a read
    is a transient error, not a wait."""
    with mock_gitlab() as rsps:
        rsps.add(responses.GET, CAR, body=requests.exceptions.ReadTimeout("read timed out"))
        with pytest.raises(GitLabUnavailable):
            train_car(account().project(42), 7)


def train_calls(double: GitLabDouble) -> list[Any]:
    """The calls the double answered but the GET /version the first train add reads once per
    process (bot/gitlab/version.py) to choose the parameter that joins when checks pass."""
    return [c for c in double.calls if c.path != "/version"]


@pytest.mark.parametrize(
    ("version", "sent"),
    [
        ("15.11", {"when_pipeline_succeeds": True}),
        ("17.5", {"when_pipeline_succeeds": True}),
        ("17.11", {"auto_merge": True}),
        ("19.5", {"auto_merge": True}),
    ],
)
def test_the_join_parameter_follows_the_gitlab_version(version: str, sent: dict[str, bool]) -> None:
    """ee/lib/api/merge_trains.rb up to 17.10 slices `when_pipeline_succeeds` out of the
    parameters (an `auto_merge` is dropped); 17.11 added `auto_merge`. The bot reads GET
    /version once and sends the one that release reads: on 15.11-17.10 a change whose checks
    are still running is queued (202), where `auto_merge` alone would be refused (400)."""
    double = GitLabDouble(URL, version=version)
    double.add_project(PROJECT, files={"config/prod.yaml": "replicas: 1\n"}, protect_default=False)
    double.add_user("gitops-bot", token="author-token", access={PROJECT: Access.DEVELOPER})
    double.set_merge_trains(PROJECT)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        double.mount(rsps, base_url=URL)
        project = Account(make_client(URL, "author-token"), "author").project(PROJECT)
        iid, sha = opened(double)  # its pipeline still running
        result = add_to_train(project, iid, sha)
    (post,) = train_calls(double)
    assert {k: v for k, v in post.body.items() if k != "sha"} == sent
    assert result.outcome is TrainOutcome.QUEUED
