"""The bot on GitLab as it really is (docs/gitlab-behaviour.md): a head pipeline attached late,
merged results pipelines, merged heads per merge method, target-branch signals, waits."""

from __future__ import annotations

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot
from tests.workflow.test_queue import changes, iid, merges


def test_a_rebased_head_is_not_passed_by_the_older_heads_green_pipeline(bot: Bot) -> None:
    """GitLab attaches a push's pipeline to the MR asynchronously (UpdateHeadPipelineWorker):
    right after the bot's rebase the MR still shows the old head's green pipeline. The bot
    waits for the rebased head's own pipeline, and that one failing stops the merge."""
    bot.gitlab.project(PROJECT).merge_method = "ff"
    bot.gitlab.set_pipelines_must_succeed(PROJECT, False)  # GitLab's default: nothing else stops it
    ops = changes(bot, 2)
    second = ops[1]
    assert operation(bot.services.engine, second)["step"] == Step.HANDLE_REBASING
    bot.gitlab.set_async_effects(True, project=PROJECT)
    bot.gitlab.complete_rebase(PROJECT, iid(bot, second), ok=True)
    bot.gitlab.run_effects("mergeability_check", project=PROJECT)
    head = bot.gitlab.mr(PROJECT, iid(bot, second)).sha
    shown = bot.gitlab.shown_head_pipeline(PROJECT, iid(bot, second))
    assert shown is not None and shown.status == "success" and shown.sha != head
    bot.settle(advance=120)  # the rebase's polls and the pipeline wait's first tiers
    assert merges(bot, second) == 0
    assert bot.state(second) is S.MERGING
    bot.gitlab.run_effects("attach_head_pipeline", project=PROJECT)
    bot.pass_pipeline(second, "failed")
    bot.settle()
    assert merges(bot, second) == 0
    assert bot.state(second) is not S.MERGED
    assert bot.gitlab.mr(PROJECT, iid(bot, second)).state == "opened"


def test_a_merged_results_pipeline_passes_the_head_it_was_built_from(bot: Bot) -> None:
    """Merged results pipelines run on the merge-ref commit (parents: the target's head, the
    MR's head), so their hook's `sha` is not the head's: it still passes the wait at once,
    not at the fallback poll five minutes later."""
    bot.gitlab.set_merged_results(PROJECT)
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    mr_iid = operation(bot.services.engine, op_id)["mr_iid"]
    pipeline = bot.gitlab.latest_pipeline(PROJECT, mr_iid)
    assert pipeline is not None and pipeline.sha != bot.gitlab.mr(PROJECT, mr_iid).sha
    bot.pass_pipeline(op_id)
    bot.settle()
    assert bot.state(op_id) is S.MERGED
