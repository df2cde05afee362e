"""The double's GitLab version profiles (sim/gitlab/versions.py): what each release answers where
releases differ. Each test names the GitLab source it follows ("gitlabhq" is gitlabhq/gitlabhq;
"!N" a merge request and "#N" an issue of gitlab.com/gitlab-org/gitlab)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from sim.gitlab import Access, GitLabDouble
from sim.gitlab.versions import PROFILES, REAL

URL = "https://gitlab.example.com"
API = f"{URL}/api/v4"
PROJECT = "platform/config"
P = f"{API}/projects/platform%2Fconfig"
HOOK = "http://bot.test/hook"
#: releases up to 17.10 / from 17.11 among the real profiles
UP_TO_17_10 = [name for name in REAL if name in {"15.11", "16.11", "17.5"}]
FROM_17_11 = [name for name in REAL if name not in UP_TO_17_10]


@pytest.fixture(params=REAL)
def release(request: pytest.FixtureRequest) -> str:
    """Each real GitLab release profile in turn."""
    name: str = request.param
    return name


def make(version: str, **project: Any) -> GitLabDouble:
    """A double answering as `version`: one project, bot (Developer), alice (Maintainer)."""
    d = GitLabDouble(URL, version=version)
    d.add_project(PROJECT, files={"a.txt": "a\n"}, protect_default=False, **project)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.add_user("alice", token="alice-token", access={PROJECT: Access.MAINTAINER})
    d.add_hook(PROJECT, HOOK, token="secret")
    return d


@pytest.fixture
def double(release: str) -> Iterator[GitLabDouble]:
    d = make(release)
    with d.mocked(URL):
        yield d


def call(method: str, path: str, who: str = "bot", **kw: Any) -> requests.Response:
    """One API call as `who` (bot or alice)."""
    headers = {"PRIVATE-TOKEN": f"{who}-token"}
    return requests.request(method, f"{P}{path}", headers=headers, timeout=5, **kw)


def open_mr(double: GitLabDouble, branch: str = "feature", **kw: Any) -> int:
    """An MR by bot whose pipeline passed: mergeable unless the test says otherwise."""
    double.new_pipeline_status = kw.pop("pipeline", "success")
    return double.open_mr(PROJECT, branch, author="bot", **kw).iid


# -- GET /version -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PROFILES))
def test_get_version_answers_the_profile_version(name: str) -> None:
    """GET /version answers {version, revision}; the version is the profile's (lib/api/
    version.rb: `Gitlab::VERSION`, "-ee" on Enterprise builds, "-pre" on GitLab.com)."""
    d = make(name)
    with d.mocked(URL):
        answer = requests.get(f"{API}/version", headers={"PRIVATE-TOKEN": "bot-token"}, timeout=5)
    assert answer.status_code == 200
    assert answer.json()["version"] == PROFILES[name].version


def test_default_profile_is_sim_and_mode_switches_between_the_old_profiles() -> None:
    """Without `version` the double answers as before profiles ("sim", 17.5.0-sim); the old
    `mode` switch selects "sim" (new) or "sim-old" (old); a version and a mode together, or an
    unknown profile, are a test's mistake."""
    d = GitLabDouble(URL)
    assert (d.version, d.mode, d.profile.version) == ("sim", "new", "17.5.0-sim")
    d.mode = "old"
    old = d.profile
    assert (d.version, old.repeat_approve, old.cannot_be_merged) == ("sim-old", 401, 406)
    d.version = "16.11"
    assert (d.mode, d.profile.real) == ("16.11", True)
    assert GitLabDouble(URL, mode="old").version == "sim-old"
    with pytest.raises(ValueError, match="not both"):
        GitLabDouble(URL, mode="new", version="17.5")
    with pytest.raises(ValueError, match="no GitLab profile"):
        GitLabDouble(URL, version="12.0")


# -- approvals --------------------------------------------------------------------------------


def test_repeat_approve_by_the_same_user_per_release(double: GitLabDouble, release: str) -> None:
    """A second approve by the same user: 401 up to the newest release (gitlabhq lib/api/
    merge_request_approvals.rb `unauthorized! unless success`: ApprovalService refuses one who
    approved already, read at bb27269b9b71 and 0286e4c628d6; #526532 reports it on GitLab.com in
    2025), 304 on the newest (`not_modified! if merge_request.approved_by?(current_user)`,
    !244481, #604754). The approval stays either way."""
    iid = open_mr(double)
    assert call("POST", f"/merge_requests/{iid}/approve", "alice").status_code == 201
    again = call("POST", f"/merge_requests/{iid}/approve", "alice")
    expected = 304 if release == "19.5" else 401
    assert again.status_code == expected == double.profile.repeat_approve
    assert double.mr(PROJECT, iid).approvals == [double.user("alice").id]


def test_unapprove_without_an_approval_per_release(double: GitLabDouble, release: str) -> None:
    """Unapprove by a user with no approval on the MR: 404 "404 Not Found" (gitlabhq lib/api/
    merge_request_approvals.rb `not_found! unless success`; RemoveApprovalService returns nil
    unless approved_by?), 304 on the newest (`not_modified! unless approved_by?`, !244481)."""
    iid = open_mr(double)
    answer = call("POST", f"/merge_requests/{iid}/unapprove", "alice")
    if release == "19.5":
        assert (answer.status_code, answer.content) == (304, b"")
    else:
        assert (answer.status_code, answer.json()) == (404, {"message": "404 Not Found"})


# -- merge ------------------------------------------------------------------------------------


def conflicting_mr(double: GitLabDouble, **kw: Any) -> int:
    """An MR whose change of a.txt conflicts with main's."""
    iid = open_mr(double, files={"a.txt": "mine\n"}, **kw)
    double.advance_branch(PROJECT, "main", {"a.txt": "theirs\n"})
    return iid


def test_merge_of_a_conflicting_mr_per_release(double: GitLabDouble, release: str) -> None:
    """A conflict: 422 "Branch cannot be merged" up to 17.11 (gitlabhq lib/api/merge_requests.rb
    `render_api_error!('Branch cannot be merged', 422) unless ... mergeable?`; 406 before the
    change_response_code_merge_status rollout, !90976, #356930), 405 on the newest (execute_merge:
    `not_allowed!` unless mergeable?, whose git checks include the conflict: app/models/
    merge_request.rb mergeable_git_state_checks). Nothing is merged."""
    iid = conflicting_mr(double)
    answer = call("PUT", f"/merge_requests/{iid}/merge", "alice")
    if release == "19.5":
        assert (answer.status_code, answer.json()) == (405, {"message": "405 Method Not Allowed"})
    else:
        assert (answer.status_code, answer.json()) == (422, {"message": "Branch cannot be merged"})
    assert double.mr(PROJECT, iid).state == "opened"


@pytest.mark.parametrize(("mode", "status"), [("old", 406), ("new", 422)])
def test_merge_of_a_conflicting_mr_in_the_old_modes(mode: str, status: int) -> None:
    """The old switch keeps its meaning: "old" is GitLab before !90976 (406), "new" 422."""
    d = GitLabDouble(URL, mode=mode)
    d.add_project(PROJECT, files={"a.txt": "a\n"}, protect_default=False)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    d.add_user("alice", token="alice-token", access={PROJECT: Access.MAINTAINER})
    with d.mocked(URL):
        iid = conflicting_mr(d)
        assert call("PUT", f"/merge_requests/{iid}/merge", "alice").status_code == status


def test_merge_that_needs_a_rebase_per_release(release: str) -> None:
    """Fast-forward project, target moved: 422 "Branch cannot be merged" up to 17.11 (mergeable?
    is false when should_be_rebased?), 405 on the newest (`not_allowed!` unless mergeable?)."""
    d = make(release, merge_method="ff")
    with d.mocked(URL):
        iid = open_mr(d, files={"b.txt": "b\n"})
        d.advance_branch(PROJECT, "main", {"c.txt": "c\n"})
        answer = call("PUT", f"/merge_requests/{iid}/merge", "alice")
    assert answer.status_code == (405 if release == "19.5" else 422)


def test_merge_refuses_not_mergeable_now_before_a_conflict(
    double: GitLabDouble, release: str
) -> None:
    """A conflicting MR whose pipeline still runs: 405 on every release (up to 17.11
    `not_allowed!` unless mergeable_state? comes before the 422 of the git checks; the newest
    refuses both with 405). Only the old "sim" profiles answered the conflict first."""
    iid = conflicting_mr(double, pipeline="running")
    assert call("PUT", f"/merge_requests/{iid}/merge", "alice").status_code == 405


def test_merge_with_a_stale_sha_per_release(double: GitLabDouble, release: str) -> None:
    """A stale `sha`: 409 "SHA does not match HEAD of source branch: <head>" (lib/api/helpers.rb
    check_sha_param!). Up to 17.11 it is checked after mergeability, so an MR not mergeable now
    answers 405 first; the newest checks it first (build_merge_params before execute_merge)."""
    iid = open_mr(double)
    head = double.mr(PROJECT, iid).sha
    stale = call("PUT", f"/merge_requests/{iid}/merge", "alice", json={"sha": "0" * 40})
    assert (stale.status_code, stale.json()) == (
        409,
        {"message": f"SHA does not match HEAD of source branch: {head}"},
    )
    running = open_mr(double, "other", pipeline="running")
    both = call("PUT", f"/merge_requests/{running}/merge", "alice", json={"sha": "0" * 40})
    assert both.status_code == (409 if release == "19.5" else 405)


def test_merge_without_sha_where_the_group_requires_one(release: str) -> None:
    """19.2+ groups may require a `sha` on merges ("Require a commit SHA on the merge requests
    API", `require_sha_for_merge`, !236732): then a merge without one is 400 "SHA must be
    provided when merging" before anything else (newest gitlabhq lib/api/merge_requests.rb); with
    the right sha it merges. Off, or on older releases (no such setting), no sha is fine."""
    d = make(release)
    with d.mocked(URL):
        iid = open_mr(d)
        if not d.profile.require_sha_setting:
            with pytest.raises(ValueError, match="no require_sha_for_merge"):
                d.require_sha_for_merge("platform")
            assert call("PUT", f"/merge_requests/{iid}/merge", "alice").status_code == 200
            return
        d.require_sha_for_merge("platform")
        refused = call("PUT", f"/merge_requests/{iid}/merge", "alice")
        assert (refused.status_code, refused.json()) == (
            400,
            {"message": "SHA must be provided when merging"},
        )
        sha = d.mr(PROJECT, iid).sha
        assert call("PUT", f"/merge_requests/{iid}/merge", "alice", json={"sha": sha}).ok
        other = open_mr(d, "other")
        d.require_sha_for_merge("platform", enabled=False)
        assert call("PUT", f"/merge_requests/{other}/merge", "alice").status_code == 200


# -- merge trains -----------------------------------------------------------------------------


def train_double(release: str) -> GitLabDouble:
    d = make(release)
    d.set_merge_trains(PROJECT)
    return d


@pytest.mark.parametrize("param", ["auto_merge", "when_pipeline_succeeds"])
def test_merge_train_add_with_pending_checks_per_release(release: str, param: str) -> None:
    """POST /merge_trains/merge_requests/:iid for an MR whose pipeline still runs: with the
    parameter the release declares, auto-merge is set and the MR waits (202); `auto_merge` only
    exists from 17.11 (doc/api/merge_trains.md; `when_pipeline_succeeds` deprecated then, #521290,
    still declared), and up to 17.10 Grape drops it (ee/lib/api/merge_trains.rb
    `params.slice(:sha, :squash, :when_pipeline_succeeds)`), so the MR is asked onto the train
    now, cannot be (ee/app/services/merge_trains/add_merge_request_service.rb), and is refused
    400 ("Failed to merge" up to 17.10, "No available merge train strategy" from 17.11): it
    never queues."""
    d = train_double(release)
    with d.mocked(URL):
        iid = open_mr(d, pipeline="running")
        answer = call("POST", f"/merge_trains/merge_requests/{iid}", json={param: True})
    known = param == "when_pipeline_succeeds" or release in FROM_17_11
    if known:
        assert answer.status_code == 202
        assert d.mr(PROJECT, iid).auto_merge
    else:
        assert (answer.status_code, answer.json()["message"]) == (
            400,
            "400 Bad request - Failed to merge",
        )
        assert not d.mr(PROJECT, iid).auto_merge


def test_merge_train_refusal_words_per_release(release: str) -> None:
    """An MR that cannot join (its pipeline failed) is refused 400 with the release's words:
    "Failed to merge" up to 17.10, "No available merge train strategy" from 17.11."""
    d = train_double(release)
    with d.mocked(URL):
        iid = open_mr(d, pipeline="failed")
        answer = call("POST", f"/merge_trains/merge_requests/{iid}", json={"auto_merge": True})
    words = "No available merge train strategy" if release in FROM_17_11 else "Failed to merge"
    assert (answer.status_code, answer.json()) == (400, {"message": f"400 Bad request - {words}"})


# -- webhook headers --------------------------------------------------------------------------


def test_webhook_delivery_headers_per_release(double: GitLabDouble, release: str) -> None:
    """The delivery headers a release sends (doc/user/project/integrations/webhooks.md,
    "Delivery headers"): X-Gitlab-Event-UUID (14.8) and X-Gitlab-Instance (15.5) on every
    profile, X-Gitlab-Webhook-UUID from 16.2 (#230830), Idempotency-Key from 17.4 (#388692);
    User-Agent "GitLab/<version>"; X-Gitlab-Token when the hook has a secret."""
    iid = open_mr(double)
    double.add_note(PROJECT, iid, "alice", "hello")
    headers = double.outgoing[-1].headers
    assert headers["User-Agent"] == f"GitLab/{double.profile.version}"
    assert headers["X-Gitlab-Token"] == "secret"
    assert {"X-Gitlab-Event-UUID", "X-Gitlab-Instance"} <= headers.keys()
    assert ("X-Gitlab-Webhook-UUID" in headers) == (release != "15.11")
    assert ("Idempotency-Key" in headers) == (release not in {"15.11", "16.11"})
    resent = double.outgoing[-1].resend_headers()
    assert resent.get("Idempotency-Key") == headers.get("Idempotency-Key")
    assert resent["X-Gitlab-Event-UUID"] != headers["X-Gitlab-Event-UUID"]
