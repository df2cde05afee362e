"""GitLab's webhook auto-disabling in the double: what four (or forty) failed deliveries in a row
do to a project hook, per release, and that a disabled hook is sent nothing.

Sources: gitlabhq app/models/concerns/web_hooks/auto_disabling.rb (both versions: up to 17.10
`failed!` / `backoff!` with FAILURE_THRESHOLD 3; from 17.11 `backoff!` only, with
TEMPORARILY_DISABLED_FAILURE_THRESHOLD 3 and PERMANENTLY_DISABLED_FAILURE_THRESHOLD 39),
app/services/web_hook_service.rb (`response_category`, `return ... 'Hook disabled' if
disabled?`), app/services/web_hooks/log_execution_service.rb (`update_hook_failure_state`),
doc/user/project/integrations/webhooks.md "Auto-disabled webhooks" (17.11: !166329)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import requests
import responses

from sim.gitlab import Access, GitLabDouble, Hook
from sim.gitlab.versions import REAL
from tests.double import START, Clock

URL = "https://gitlab.example.com"
PROJECT = "platform/config"
HOOK = "http://bot.test/hook"
UP_TO_17_10 = ["15.11", "16.11", "17.5"]
FROM_17_11 = ["17.11", "19.5"]
assert set(UP_TO_17_10 + FROM_17_11) == set(REAL)


class Receiver:
    """The hook's receiver: answers each delivery with the next status of its script."""

    def __init__(self) -> None:
        self.script: list[int] = []
        self.received = 0

    def __call__(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        self.received += 1
        return self.script.pop(0), {}, ""


@pytest.fixture
def receiver() -> Receiver:
    return Receiver()


def make(version: str, clock: Clock, receiver: Receiver) -> tuple[GitLabDouble, Hook, int]:
    d = GitLabDouble(URL, version=version, clock=clock)
    d.add_project(PROJECT, files={"a.txt": "a\n"}, protect_default=False)
    d.add_user("bot", token="bot-token", access={PROJECT: Access.DEVELOPER})
    hook = d.add_hook(PROJECT, HOOK, events=["note_events"])
    iid = d.open_mr(PROJECT, "feature", author="bot").iid
    return d, hook, iid


@pytest.fixture
def mock(receiver: Receiver) -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add_callback(responses.POST, HOOK, callback=receiver)
        yield rsps


def deliver(d: GitLabDouble, iid: int, receiver: Receiver, *statuses: int) -> int:
    """One event per status, each delivered at once and answered with that status; how many
    reached the receiver."""
    before = receiver.received
    for status in statuses:
        receiver.script.append(status)
        d.add_note(PROJECT, iid, "bot", "a note")
        d.deliver_outgoing()
    receiver.script.clear()
    return receiver.received - before


@pytest.mark.parametrize("version", UP_TO_17_10)
@pytest.mark.usefixtures("mock")
def test_four_consecutive_4xx_disable_a_hook_for_good_up_to_17_10(
    version: str, clock: Clock, receiver: Receiver
) -> None:
    """Up to 17.10 a 4xx is a misconfiguration (`failed!`): three are tolerated, the 4th in a row
    disables the hook for good (recent_failures > 3, disabled_until nil): `alert_status`
    "disabled", and nothing is sent any more, even a day later."""
    d, hook, iid = make(version, clock, receiver)
    assert deliver(d, iid, receiver, 413, 413, 413) == 3
    assert (hook.alert_status, hook.recent_failures) == ("executable", 3)
    assert deliver(d, iid, receiver, 413) == 1
    assert (hook.alert_status, hook.disabled_until) == ("disabled", None)
    clock.advance(2 * 86400)
    assert deliver(d, iid, receiver, 200) == 0
    assert d.outgoing == []


@pytest.mark.parametrize("version", FROM_17_11)
@pytest.mark.usefixtures("mock")
def test_four_consecutive_failures_disable_a_hook_for_a_while_from_17_11(
    version: str, clock: Clock, receiver: Receiver
) -> None:
    """From 17.11 every failure (4xx too) backs off: the 4th in a row disables the hook for
    1 minute ("temporarily_disabled"), each later one for twice as long (up to a day); while
    disabled nothing is sent; the 40th failure in a row disables it for good."""
    d, hook, iid = make(version, clock, receiver)
    assert deliver(d, iid, receiver, 413, 413, 413, 413) == 4
    assert (hook.alert_status, hook.disabled_until) == (
        "temporarily_disabled",
        START + timedelta(minutes=1),
    )
    assert deliver(d, iid, receiver, 200) == 0  # disabled: dropped unsent
    clock.advance(61)
    assert deliver(d, iid, receiver, 500) == 1
    assert hook.disabled_until == clock.now + timedelta(minutes=2)
    for _ in range(35):
        clock.advance(86400 + 1)
        assert deliver(d, iid, receiver, 404) == 1
    assert (hook.recent_failures, hook.alert_status) == (40, "disabled")
    clock.advance(10 * 86400)
    assert deliver(d, iid, receiver, 200) == 0


@pytest.mark.parametrize("version", REAL)
@pytest.mark.usefixtures("mock")
def test_a_2xx_answer_resets_the_failure_count(
    version: str, clock: Clock, receiver: Receiver
) -> None:
    """Only consecutive failures count: a 2xx (or 3xx) answer is `enable!` (recent_failures 0,
    disabled_until nil), so 3 failures, a success and 3 more leave the hook enabled."""
    d, hook, iid = make(version, clock, receiver)
    assert deliver(d, iid, receiver, 422, 422, 422, 200, 401, 401, 302, 400, 400, 400) == 10
    assert (hook.alert_status, hook.recent_failures) == ("executable", 3)


@pytest.mark.parametrize("version", UP_TO_17_10)
@pytest.mark.usefixtures("mock")
def test_500_or_no_answer_disables_a_hook_for_a_while_up_to_17_10(
    version: str, clock: Clock, receiver: Receiver
) -> None:
    """Up to 17.10 a 500 (`response.internal_server_error?`) or no answer at all (a timeout, a
    refused connection: InternalErrorResponse) backs off: the 4th failure in a row disables the
    hook for 1 minute, the next (once it may be sent again) for 2 minutes; a 4xx after such
    failures disables it for good (disabled_until cleared by `failed!`)."""
    d, hook, iid = make(version, clock, receiver)
    assert deliver(d, iid, receiver, 500, 500, 500, 500) == 4
    assert (hook.alert_status, hook.disabled_until) == (
        "temporarily_disabled",
        START + timedelta(minutes=1),
    )
    clock.advance(61)
    d.add_note(PROJECT, iid, "bot", "a note")
    (delivery,) = d.take_outgoing()
    d.hook_answered(delivery, 0)  # the relay's "no answer"
    assert hook.disabled_until == clock.now + timedelta(minutes=2)
    clock.advance(121)
    assert deliver(d, iid, receiver, 410) == 1
    assert (hook.alert_status, hook.disabled_until) == ("disabled", None)


@pytest.mark.parametrize("version", UP_TO_17_10)
@pytest.mark.usefixtures("mock")
def test_a_5xx_other_than_500_counts_as_a_misconfiguration_up_to_17_10(
    version: str, clock: Clock, receiver: Receiver
) -> None:
    """Up to 17.10 the code's test is `response.internal_server_error?` (500 only), so four 502s
    in a row disable a hook for good as 4xx answers do. (The 17.10 documentation says "5xx" are
    temporary; the double follows the code.)"""
    d, hook, iid = make(version, clock, receiver)
    assert deliver(d, iid, receiver, 502, 503, 504, 502) == 4
    assert hook.alert_status == "disabled"


@pytest.mark.parametrize("version", REAL)
@pytest.mark.usefixtures("mock")
def test_a_delivery_queued_before_the_hook_was_disabled_is_not_sent(
    version: str, clock: Clock, receiver: Receiver
) -> None:
    """GitLab checks the hook again when it runs the delivery (WebHookService#execute: "Hook
    disabled"): events queued before the hook was disabled are dropped unsent; once a test
    request re-enables it (control `enable_hook`), deliveries flow again."""
    d, hook, iid = make(version, clock, receiver)
    d.add_note(PROJECT, iid, "bot", "queued first")
    d.disable_hook(PROJECT, hook.id)
    assert d.deliver_outgoing() == []
    assert receiver.received == 0
    d.enable_hook(PROJECT, hook.id)
    assert deliver(d, iid, receiver, 200) == 1


@pytest.mark.usefixtures("mock")
def test_self_managed_without_the_flag_never_disables_a_hook(
    clock: Clock, receiver: Receiver
) -> None:
    """On Self-Managed the `auto_disabling_web_hooks` flag is off by default since 15.10
    (#390157): failures are not counted and the hook stays enabled (`hook_auto_disabling`)."""
    d, hook, iid = make("17.5", clock, receiver)
    d.hook_auto_disabling = False
    assert deliver(d, iid, receiver, *[413] * 6) == 6
    assert (hook.alert_status, hook.recent_failures) == ("executable", 0)
