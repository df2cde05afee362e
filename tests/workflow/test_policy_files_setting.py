"""GITOPS_POLICY_FILES: on by default (each repository's `.gitops/bot.yml` applies to the
changes that start after it), `off` to ignore every file (the environment's settings apply to
every project; nothing is read)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses
from redis import Redis
from sqlalchemy.engine import Engine

from bot.config import Settings
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.render import load_status, render_status
from jobs.outbox import dispatch
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot
from tests.workflow.test_policy import AUTH, CONFIG_ONLY, accepted, submit


@pytest.fixture
def bot_off(db: Engine, redis: Redis) -> Iterator[Bot]:
    """The bot with GITOPS_POLICY_FILES=off."""
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        off = Settings.from_env({"GITOPS_POLICY_FILES": "off"}).policy_files
        bot = Bot(db, redis, rsps, policy_files=off)
        yield bot
        bot.close()


def test_on_by_default_and_off_when_set() -> None:
    """Unset (or `on`, any case) reads the files; `off` does not; anything else is refused
    with the variable's name and its choices."""
    assert Settings().policy_files is True
    assert Settings.from_env({}).policy_files is True
    assert Settings.from_env({"GITOPS_POLICY_FILES": " ON "}).policy_files is True
    assert Settings.from_env({"GITOPS_POLICY_FILES": "off"}).policy_files is False
    with pytest.raises(ValueError, match=r"GITOPS_POLICY_FILES must be one of on, off, got 'no'"):
        Settings.from_env({"GITOPS_POLICY_FILES": "no"})


def test_with_policy_files_off_the_file_is_ignored(bot_off: Bot) -> None:
    """The file allows config/ only; with `off` a change to apps/ is accepted, follows the
    flag's order (approval first), records no policy (only the target's head commit, read with
    the branch), and the file is never read."""
    bot = bot_off
    head = bot.gitlab.push(PROJECT, "main", {".gitops/bot.yml": CONFIG_ONLY})
    start = len(bot.gitlab.calls)
    op_id = accepted(bot, submit(bot, PROJECT, "apps/web.yaml"))
    op = operation(bot.services.engine, op_id)
    assert (op["policy_sha"], op["policy"], op["flow"]) == (head, None, Flow.APPROVE_FIRST)
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    assert bot.gitlab.project(PROJECT).mrs == {}  # approval first: no MR yet
    view = bot.client.get(f"/api/v1/changes/{op_id}", headers=AUTH).get_json()
    assert view["policy_commit"] == head
    assert bot.gitlab.count(path_contains=".gitops/bot.yml") == 0
    assert len(bot.gitlab.calls) > start  # the change itself did call GitLab
    status = load_status(bot.services.engine, op_id)
    assert status is not None
    text = render_status(status, "https://gitops.example.com", policy_files=False)
    assert "- **Policy:** defaults (the environment's settings: policy files are off)" in text


def test_with_policy_files_off_the_mrs_status_comment_says_so(bot_off: Bot) -> None:
    """The status comment GitLab shows says the files are off, not that the branch has none."""
    bot = bot_off
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    dispatch()
    iid = operation(bot.services.engine, op_id)["mr_iid"]
    [status] = [n.body for n in bot.gitlab.mr(PROJECT, iid).notes.values()]
    assert "- **Policy:** defaults (the environment's settings: policy files are off)" in status
    assert "has no `.gitops/bot.yml`" not in status
