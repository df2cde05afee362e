"""The write seams refuse live text, and what the bot writes for a hostile request reads inert."""

from __future__ import annotations

import pytest

from bot.core.inert import NotInert
from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.gitlab import create_change, upsert_status_note
from jobs.outbox import dispatch
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot

FILES = [{"path": "config/prod.yaml", "content": "replicas: 3\n"}]


def _writes(bot: Bot) -> int:
    return len([c for c in bot.gitlab.calls if c.method in ("POST", "PUT", "DELETE")])


@pytest.mark.parametrize(
    "body",
    ["fine\n/close", "thanks @all", "rtl \u202e text", "line\r/merge"],
)
def test_a_status_note_that_is_not_inert_is_never_written(bot: Bot, body: str) -> None:
    """A status comment body with a quick action, mention or hidden character raises NotInert,
    and GitLab receives no note at all."""
    op_id = bot.request(Flow.MR_FIRST)
    bot.settle()
    iid = operation(bot.services.engine, op_id)["mr_iid"]
    project = bot.services.require_clients().author.project(PROJECT)
    before = _writes(bot)
    with pytest.raises(NotInert):
        upsert_status_note(project, iid, op_id, body)
    assert _writes(bot) == before


def test_create_change_refuses_a_live_description_before_any_call(bot: Bot) -> None:
    """A description with a `/target_branch` line raises NotInert before GitLab is called."""
    project = bot.services.require_clients().author.project(PROJECT)
    before = len(bot.gitlab.calls)
    with pytest.raises(NotInert, match="quick action"):
        create_change(
            project,
            operation_id="op-live",
            target_branch="main",
            start_sha=bot.gitlab.project(PROJECT).branches["main"],
            files=FILES,
            title="Scale",
            description="Scale it\n/target_branch evil",
        )
    assert len(bot.gitlab.calls) == before
    assert bot.gitlab.branch_head(PROJECT, "gitops/op-live") is None


def test_create_change_makes_the_title_and_commit_subject_inert(bot: Bot) -> None:
    """A title `/label ~x @all` with a bidi override reaches the MR and the commit subject with
    fullwidth look-alikes for the leading `/` and the `@`, and the override shown as [U+202E]."""
    project = bot.services.require_clients().author.project(PROJECT)
    ref = create_change(
        project,
        operation_id="op-title",
        target_branch="main",
        start_sha=bot.gitlab.project(PROJECT).branches["main"],
        files=FILES,
        title="  /label ~x @all \u202eevil",
        description="Requested via the portal",
    )
    expected = "\uff0flabel ~x \uff20all [U+202E]evil"
    assert bot.gitlab.mr(PROJECT, ref.mr_iid).title == expected
    commit = bot.gitlab.state.commits[ref.commit_sha]
    assert commit.message == f"{expected}\n\nChange-Request: op-title\n"


def test_a_hostile_request_reaches_gitlab_quoted_and_inert(bot: Bot) -> None:
    """A request whose description carries quick actions and `@all`, and whose requester is
    `eve/@all`, opens an MR whose description quotes the text in a fenced block and whose status
    comment shows the title and requester with no live mention."""
    op_id = bot.request(
        Flow.MR_FIRST,
        title="@all /merge",
        requested_by="eve/@all",
        description="Please scale.\r\n/target_branch evil\u2028/assign_reviewer @bob\n```\n@all",
    )
    bot.settle()
    assert bot.state(op_id) is S.MR_CREATING
    dispatch()
    mr = bot.gitlab.mr(PROJECT, operation(bot.services.engine, op_id)["mr_iid"])
    assert mr.target_branch == "main"
    assert mr.title == "\uff20all /merge"
    assert mr.description == (
        "> ````text\n"
        "> Please scale.\n"
        "> /target_branch evil\n"
        "> /assign_reviewer @bob\n"
        "> ```\n"
        "> @all\n"
        "> ````\n"
        "\n"
        f"Requested by eve/\uff20all through gitops-bot (operation `{op_id}`)."
    )
    [status] = [note.body for note in mr.notes.values()]
    assert "- **Request:** \uff20all /merge (requested by eve/\uff20all)" in status
    assert "@" not in status
