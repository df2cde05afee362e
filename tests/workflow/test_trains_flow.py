"""Projects with GitLab's merge trains (Premium): the bot hands each approved change to the
train of its target branch, pinned to the checked head, and follows it; it never merges or
rebases itself there and keeps no line of its own. On Free/CE it merges through its queue."""

from __future__ import annotations

from datetime import timedelta

from bot.core.states import BindingState as S
from bot.core.states import Step
from bot.store import queue
from bot.store.models import OPERATIONS, utcnow
from tests.builders import operation
from tests.workflow.harness import PROJECT, SECRETS, Bot
from tests.workflow.test_queue import changes, iid, merges, rebases

#: A look at the car comes after this many seconds (poll.train_tiers' first tier, 30 s).
FOLLOW = 31


def train_pipelines_pass(bot: Bot) -> None:
    """Every car's train pipeline passes (the train merges the first, then the next...)."""
    for _ in range(10):
        cars = bot.gitlab.train(PROJECT, "main")
        if not cars:
            return
        for car in cars:
            if car.pipeline_id is not None:
                bot.gitlab.set_pipeline(PROJECT, car.pipeline_id, "success")


def project_reads(bot: Bot) -> int:
    return len([c for c in bot.gitlab.calls if c.method == "GET" and c.path == "/projects/1"])


def test_changes_ride_the_merge_train_pinned_to_their_checked_heads(bot: Bot) -> None:
    """Three changes approved together: each is added to the train with its verified head, none
    waits in the bot's queue, the bot never merges or rebases; the train merges all three."""
    bot.gitlab.set_merge_trains(PROJECT)
    bot.gitlab.project(PROJECT).merge_method = "ff"
    ops = changes(bot, 3)
    engine = bot.services.engine
    assert queue.line(engine, PROJECT, "main") == []
    adds = bot.gitlab.calls_matching("POST", path_contains="/merge_trains/merge_requests/")
    assert len(adds) == 3
    verified = {operation(engine, op_id)["verified_sha"] for op_id in ops}
    assert {call.body.get("sha") for call in adds} == verified
    # the double answers GET /version as 17.5: the Merge Trains API's parameter then is
    # when_pipeline_succeeds (auto_merge from 17.11)
    assert all(call.body.get("when_pipeline_succeeds") for call in adds)
    assert not any("auto_merge" in call.body for call in adds)
    train_pipelines_pass(bot)
    bot.settle(advance=FOLLOW)
    for op_id in ops:
        assert bot.state(op_id) is S.MERGED, operation(engine, op_id)
        assert merges(bot, op_id) == 0
        assert rebases(bot, op_id) == 0
        bot.deployed(op_id)
    bot.settle()
    assert [bot.state(op_id) for op_id in ops] == [S.VALIDATED] * 3
    assert project_reads(bot) == 1  # one read of the setting serves all three
    for i in range(3):
        assert bot.gitlab.file(PROJECT, f"config/svc-{i}.yaml") == "replicas: 3\n"


def test_a_car_dropped_from_the_train_fails_with_gitlabs_reason(bot: Bot) -> None:
    """The train pipeline of a change fails: GitLab removes it from the train; the bot stops it
    explicitly with GitLab's reason, and the others still merge."""
    bot.gitlab.set_merge_trains(PROJECT)
    ops = changes(bot, 2)
    first = bot.gitlab.train_car(PROJECT, iid(bot, ops[0]))
    assert first is not None
    assert first.pipeline_id is not None
    bot.gitlab.set_pipeline(PROJECT, first.pipeline_id, "failed")
    bot.settle(advance=FOLLOW)
    assert bot.state(ops[0]) is S.HANDLE_FAILED
    detail = operation(bot.services.engine, ops[0])["error_detail"] or ""
    assert "removed it from the merge train" in detail
    train_pipelines_pass(bot)  # the second car's rebuilt pipeline passes: the train merges it
    second = iid(bot, ops[1])
    assert bot.gitlab.mr(PROJECT, second).state == "merged"
    headers, body = bot.gitlab.webhook(
        "merge_request", project=PROJECT, iid=second, action="merge", token=SECRETS["webhook"]
    )  # GitLab's MR event of the train's merge moves it (the car's polls are the fallback)
    assert bot.client.post("/webhooks/gitlab", data=body, headers=headers).status_code == 202
    bot.settle()
    assert bot.state(ops[1]) is S.MERGED


def test_without_merge_trains_the_bots_queue_merges(bot: Bot) -> None:
    """GitLab Free/CE (no merge_trains_enabled): the bot's own queue, its own merges; the
    project's setting is read once for all the changes."""
    bot.gitlab.edition = "ce"
    bot.gitlab.project(PROJECT).merge_method = "ff"
    ops = changes(bot, 3)
    assert bot.state(ops[0]) is S.MERGED
    assert merges(bot, ops[0]) == 1
    assert [e.operation_id for e in queue.line(bot.services.engine, PROJECT, "main")] == ops[1:]
    assert operation(bot.services.engine, ops[1])["step"] == Step.HANDLE_REBASING
    assert project_reads(bot) == 1
    assert operation(bot.services.engine, ops[2])["merge_train"] is False


def test_the_setting_is_read_again_after_ten_minutes(bot: Bot) -> None:
    """A project's answer serves its changes for ten minutes; a change after that reads it."""
    bot.gitlab.edition = "ce"
    changes(bot, 1)
    assert project_reads(bot) == 1
    engine = bot.services.engine
    with engine.begin() as conn:
        conn.execute(OPERATIONS.update().values(merge_train_at=utcnow() - timedelta(minutes=11)))
    changes(bot, 1, first=1)
    assert project_reads(bot) == 2


def test_a_push_while_on_the_train_never_merges(bot: Bot) -> None:
    """Content pushed to the change's branch while its car is on the train: GitLab drops the car,
    and the bot stops the change -- the pushed content never reaches main."""
    bot.gitlab.set_merge_trains(PROJECT)
    [op_id] = changes(bot, 1)
    branch = operation(bot.services.engine, op_id)["branch"]
    assert bot.gitlab.train_car(PROJECT, iid(bot, op_id)) is not None
    bot.gitlab.push(PROJECT, branch, {"config/svc-0.yaml": "replicas: 300\n"})
    train_pipelines_pass(bot)
    bot.settle(advance=FOLLOW)
    assert bot.state(op_id) is S.HANDLE_FAILED, operation(bot.services.engine, op_id)
    assert bot.gitlab.mr(PROJECT, iid(bot, op_id)).state == "opened"
    assert bot.gitlab.file(PROJECT, "config/svc-0.yaml") != "replicas: 300\n"
