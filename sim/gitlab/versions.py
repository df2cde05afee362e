"""GitLab version profiles: what the double answers differently from one GitLab release to another.

Select one with `GitLabDouble(version="16.11")` (or `double.version = "19.5"`); `GET /version`
answers its `version`. Every field names the GitLab source it follows ("gitlabhq" is the
repository gitlabhq/gitlabhq, GitLab's source mirror; "!N" a merge request and "#N" an issue of
gitlab.com/gitlab-org/gitlab). Where the release a change shipped in could not be read, the field
says "release unverified" and the profiles on either side of it are the ones whose source was read.

Two profiles are not a GitLab release: "sim" (the default) and "sim-old" keep what the double
answered before profiles existed (the old `mode="new"` / `mode="old"`), so tests written against
it keep their meaning. "sim" differs from real 17.5 in three points: a repeat approve answers 304
(real 17.5: 401), the Merge Trains API reads `auto_merge` as well (real 17.5 declares only
`when_pipeline_succeeds`), and a conflict or a needed rebase is refused before "not mergeable now"
(real: 405 first, see `check_order`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Hook delivery headers GitLab added over time (doc/user/project/integrations/webhooks.md,
#: "Delivery headers" history): X-Gitlab-Event-UUID 14.8 (#329743), X-Gitlab-Instance 15.5
#: (#31333), X-Gitlab-Webhook-UUID 16.2 (#230830), Idempotency-Key 17.4 (#388692).
HEADERS_15_5 = frozenset({"X-Gitlab-Event-UUID", "X-Gitlab-Instance"})
HEADERS_16_2 = HEADERS_15_5 | {"X-Gitlab-Webhook-UUID"}
HEADERS_17_4 = HEADERS_16_2 | {"Idempotency-Key"}

#: `check_order` values: which refusal of PUT /merge comes first.
#: "state-first" (gitlabhq lib/api/merge_requests.rb up to 17.x, read at a 17.8+ version and at
#: older ones): 401 can_be_merged_by? -> 405 `not_allowed!` unless mergeable_state? (open, draft,
#: discussions, CI, approvals, merge_after: app/models/merge_request.rb mergeable_state_checks)
#: -> 406/422 "Branch cannot be merged" unless mergeable? (adds the git checks: conflict, rebase:
#: mergeable_git_state_checks) -> 409 check_sha_param!.
#: "sha-first" (newest stored lib/api/merge_requests.rb): 400 require_sha_for_merge -> 401 ->
#: 409 check_sha_param! (in build_merge_params) -> 405 `not_allowed!` unless mergeable? (git
#: checks included: a conflict is 405 now) -> 422 only when the merge itself did not happen.
#: "conflict-first": what the double did before profiles (conflict and rebase before 405).
CHECK_ORDERS = frozenset({"state-first", "sha-first", "conflict-first"})

#: `hook_disabling` values (app/models/concerns/web_hooks/auto_disabling.rb,
#: app/services/web_hook_service.rb response_category, app/services/web_hooks/
#: log_execution_service.rb update_hook_failure_state):
#: "4xx-permanent" (up to 17.10): 2xx/3xx `enable!` (counter to 0); exactly 500 or no answer
#: (InternalErrorResponse: timeout, connection error) `backoff!`; every other code (4xx, and 5xx
#: other than 500, since `internal_server_error?` is 500 only) `failed!`. The 4th consecutive
#: failure disables the hook: for good when the last was `failed!` (recent_failures > 3,
#: disabled_until nil), else for 1 min doubling per further backoff up to 1 day.
#: "forty-permanent" (17.11+, !166329): every non-2xx/3xx answer or no answer `backoff!`; the
#: 4th consecutive failure disables it for 1 min (doubling up to 1 day), the 40th for good.
HOOK_DISABLING = frozenset({"4xx-permanent", "forty-permanent"})


@dataclass(frozen=True)
class Profile:
    """What one GitLab release answers where releases differ (the fields' sources above)."""

    #: the profile's name ("17.5")
    name: str
    #: what GET /version answers as `version`
    version: str
    #: a real GitLab release (False for "sim" and "sim-old")
    real: bool
    #: POST .../approve by a user who already approved: 401 (`unauthorized! unless success`,
    #: MergeRequests::ApprovalService returns nil when can_be_approved_by? is false) or 304
    #: (`not_modified! if merge_request.approved_by?(current_user)`, !244481, #604754)
    repeat_approve: int
    #: POST .../unapprove by a user who has no approval there: 404 (`not_found! unless success`,
    #: RemoveApprovalService returns nil unless approved_by?) or 304 (same !244481)
    unapprove_absent: int
    #: "Branch cannot be merged" (conflict, or a rebase needed in a fast-forward project) under
    #: "state-first"/"conflict-first": 406 before the `change_response_code_merge_status` flag
    #: was turned on by default (!90976, #356930; 15.x), 422 after
    cannot_be_merged: int
    #: the order of PUT /merge's refusals (see CHECK_ORDERS)
    check_order: str
    #: whether groups have the "Require a commit SHA on the merge requests API" setting
    #: (`require_sha_for_merge`, !236732, 19.2): when on, a merge without `sha` is 400
    #: "SHA must be provided when merging" (newest lib/api/merge_requests.rb)
    require_sha_setting: bool
    #: POST /merge_trains/merge_requests/:iid parameters that ask to join when the checks pass:
    #: ee/lib/api/merge_trains.rb declares `when_pipeline_succeeds` and passes
    #: `params.slice(:sha, :squash, :when_pipeline_succeeds)` (an undeclared `auto_merge` is
    #: dropped); doc/api/merge_trains.md adds `auto_merge` in 17.11 and deprecates
    #: `when_pipeline_succeeds` (#521290) without removing it
    train_auto_merge_params: frozenset[str]
    #: the reason of POST /merge_trains/merge_requests/:iid's 400 for an MR that cannot join
    #: (`bad_request!(response.message)`): "Failed to merge" (AutoMergeService#execute answered
    #: :failed: ee/app/services/merge_trains/add_merge_request_service.rb, older stored
    #: versions) or "No available merge train strategy" (its `select_strategy`, newest stored
    #: version, which reads `auto_merge`: taken to come with 17.11's parameter)
    train_refusal: str
    #: optional webhook delivery headers this release sends
    hook_headers: frozenset[str]
    #: the webhook auto-disabling rule (see HOOK_DISABLING)
    hook_disabling: str

    def __post_init__(self) -> None:
        assert self.check_order in CHECK_ORDERS, self.check_order
        assert self.hook_disabling in HOOK_DISABLING, self.hook_disabling


FAILED_TO_MERGE = "Failed to merge"
NO_STRATEGY = "No available merge train strategy"
_WPS = frozenset({"when_pipeline_succeeds"})
_BOTH = frozenset({"when_pipeline_succeeds", "auto_merge"})

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile(
            name="15.11",
            version="15.11.0-ee",
            real=True,
            repeat_approve=401,
            unapprove_absent=404,
            cannot_be_merged=422,
            check_order="state-first",
            require_sha_setting=False,
            train_auto_merge_params=_WPS,
            train_refusal=FAILED_TO_MERGE,
            hook_headers=HEADERS_15_5,
            hook_disabling="4xx-permanent",
        ),
        Profile(
            name="16.11",
            version="16.11.0-ee",
            real=True,
            repeat_approve=401,
            unapprove_absent=404,
            cannot_be_merged=422,
            check_order="state-first",
            require_sha_setting=False,
            train_auto_merge_params=_WPS,
            train_refusal=FAILED_TO_MERGE,
            hook_headers=HEADERS_16_2,
            hook_disabling="4xx-permanent",
        ),
        Profile(
            name="17.5",
            version="17.5.0-ee",
            real=True,
            repeat_approve=401,
            unapprove_absent=404,
            cannot_be_merged=422,
            check_order="state-first",
            require_sha_setting=False,
            train_auto_merge_params=_WPS,
            train_refusal=FAILED_TO_MERGE,
            hook_headers=HEADERS_17_4,
            hook_disabling="4xx-permanent",
        ),
        Profile(
            name="17.11",
            version="17.11.0-ee",
            real=True,
            repeat_approve=401,
            unapprove_absent=404,
            cannot_be_merged=422,
            check_order="state-first",
            require_sha_setting=False,
            train_auto_merge_params=_BOTH,
            train_refusal=NO_STRATEGY,
            hook_headers=HEADERS_17_4,
            hook_disabling="forty-permanent",
        ),
        # The newest: the newest stored source (master at 19.5.0-pre, what GitLab.com runs).
        Profile(
            name="19.5",
            version="19.5.0-pre",
            real=True,
            repeat_approve=304,
            unapprove_absent=304,
            cannot_be_merged=422,
            check_order="sha-first",
            require_sha_setting=True,
            train_auto_merge_params=_BOTH,
            train_refusal=NO_STRATEGY,
            hook_headers=HEADERS_17_4,
            hook_disabling="forty-permanent",
        ),
        # What the double answered before profiles (`mode="new"`, the default).
        Profile(
            name="sim",
            version="17.5.0-sim",
            real=False,
            repeat_approve=304,
            unapprove_absent=404,
            cannot_be_merged=422,
            check_order="conflict-first",
            require_sha_setting=False,
            train_auto_merge_params=_BOTH,
            train_refusal=NO_STRATEGY,
            hook_headers=HEADERS_17_4,
            hook_disabling="4xx-permanent",
        ),
        # `mode="old"`: 401 on a repeat approve, 406 on a conflict.
        Profile(
            name="sim-old",
            version="17.5.0-sim",
            real=False,
            repeat_approve=401,
            unapprove_absent=404,
            cannot_be_merged=406,
            check_order="conflict-first",
            require_sha_setting=False,
            train_auto_merge_params=_BOTH,
            train_refusal=NO_STRATEGY,
            hook_headers=HEADERS_17_4,
            hook_disabling="4xx-permanent",
        ),
    )
}

#: The profile a double starts with.
DEFAULT = "sim"
#: Real releases, oldest first (tests parametrize over these).
REAL = tuple(name for name, profile in PROFILES.items() if profile.real)
#: The newest real profile.
NEWEST = REAL[-1]
#: The old `mode` switch: mode name -> profile name.
MODES = {"new": "sim", "old": "sim-old"}


def profile(name: str) -> Profile:
    """The profile of that name; ValueError naming the known ones otherwise."""
    if name not in PROFILES:
        known = ", ".join(PROFILES)
        raise ValueError(f"no GitLab profile {name!r} (known: {known})")
    return PROFILES[name]
