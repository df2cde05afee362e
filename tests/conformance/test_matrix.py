"""The conformance matrix: the whole workflow -- both step orders, rebases, a failed pipeline, a
push after approval, a burst of four on one branch -- on every GitLab version profile and the
project settings that change the flow (merge method x merged results pipelines x pipelines must
succeed x reset approvals on push), with GitLab's asynchronous effects on (a push's pipeline
attached late, mergeability rechecked, approvals reset by a worker), on the in-process double.

Every settings combination runs; each runs on two of the five releases, so every release meets
every merge method (docs/gitlab-behaviour.md names what differs between them)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from jobs.outbox import dispatch
from sim.gitlab.versions import REAL
from tests.builders import operation
from tests.conformance.driver import drive, submit
from tests.workflow.harness import PROJECT, Bot

METHODS = ("merge", "rebase_merge", "ff")
SETTINGS = list(itertools.product(METHODS, (False, True), (False, True), (False, True)))


def _cases() -> list[Any]:
    cases = []
    for n, (method, merged_results, must_succeed, reset) in enumerate(SETTINGS):
        for version in (REAL[n % len(REAL)], REAL[(n + 2) % len(REAL)]):
            name = (
                f"{version}-{method}{'-mr' if merged_results else ''}"
                f"{'-mps' if must_succeed else ''}{'-reset' if reset else ''}"
            )
            cases.append(
                pytest.param(version, method, merged_results, must_succeed, reset, id=name)
            )
    return cases


def gitlab_as(
    make_bot: Callable[..., Bot],
    version: str,
    method: str,
    merged_results: bool,
    must_succeed: bool,
    reset: bool,
) -> Bot:
    """The bot against a double answering as `version`, its project set up so."""
    bot = make_bot(gitlab_version=version)
    gitlab = bot.gitlab
    gitlab.set_merge_method(PROJECT, method)
    gitlab.set_merged_results(PROJECT, merged_results)
    gitlab.set_pipelines_must_succeed(PROJECT, must_succeed)
    gitlab.set_reset_approvals_on_push(PROJECT, reset)
    # as `hooks install` protects them: only the bot pushes, force pushes (its rebases) allowed
    gitlab.protect_branch(PROJECT, "gitops/*", push=("gitops-bot",), allow_force_push=True)
    gitlab.set_async_effects(True, project=PROJECT)
    return bot


@pytest.mark.parametrize(("version", "method", "merged_results", "must_succeed", "reset"), _cases())
def test_the_workflow_on_this_gitlab(
    make_bot: Callable[..., Bot],
    version: str,
    method: str,
    merged_results: bool,
    must_succeed: bool,
    reset: bool,
) -> None:
    """A burst of four approve-first changes to one branch (rebases where the merge method asks
    for them), one MR-first change, one whose pipeline fails, and one whose branch a person
    pushes to after it was approved: the four and the MR-first one are in effect, each merged
    head is what the target holds, the failed one and the pushed one never merge, and every
    merged bot branch is deleted."""
    bot = gitlab_as(make_bot, version, method, merged_results, must_succeed, reset)
    burst = submit(bot, 4)
    mr_first = submit(bot, 1, first=4, flow=Flow.MR_FIRST)
    failing = submit(bot, 1, first=5)
    pushed = submit(bot, 1, first=6, flow=Flow.MR_FIRST)
    states = drive(bot, burst + mr_first + failing, failing=set(failing))
    merged = burst + mr_first
    assert {op: states[op] for op in merged} == dict.fromkeys(merged, S.VALIDATED)
    assert states[failing[0]] is S.CREATE_FAILED
    engine = bot.services.engine
    dispatch(limit=10_000)  # the outbox: status comments, labels, merged branches deleted
    for op_id in merged:
        row = operation(engine, op_id)
        assert row["merge_commit_sha"] is not None
        mr = bot.gitlab.mr(PROJECT, row["mr_iid"])
        assert mr.state == "merged"
        assert row["merge_commit_sha"] in _first_parents(bot)
        assert f"gitops/{op_id}" not in bot.gitlab.project(PROJECT).branches
    # the person's push after the approval: the bot never merges what was not approved
    states = drive(bot, pushed, until=(S.APPROVAL_SENT,))
    assert states[pushed[0]] is S.APPROVAL_SENT
    iid = operation(engine, pushed[0])["mr_iid"]
    branch = bot.gitlab.mr(PROJECT, iid).source_branch
    bot.gitlab.add_member(PROJECT, "root", 40)
    bot.gitlab.protect_branch(
        PROJECT, "gitops/*", push=("gitops-bot", "root"), allow_force_push=True
    )
    bot.gitlab.push(PROJECT, branch, {"config/svc-6.yaml": "replicas: 99\n"})
    bot.gitlab.run_effects(project=PROJECT)
    states = drive(bot, pushed, until=(S.MERGED, S.VALIDATED))
    assert states[pushed[0]] in {S.HANDLE_FAILED, S.CREATE_FAILED}
    assert bot.gitlab.mr(PROJECT, iid).state == "opened"
    assert bot.gitlab.file(PROJECT, "config/svc-6.yaml") is None


def _first_parents(bot: Bot) -> set[str]:
    """Every commit on the target branch's first-parent line (what it held, in turn)."""
    commits = bot.gitlab.state.commits
    sha: str | None = bot.gitlab.project(PROJECT).branches["main"]
    seen: set[str] = set()
    while sha is not None and sha not in seen:
        seen.add(sha)
        parents = commits[sha].parents
        sha = parents[0] if parents else None
    return seen
