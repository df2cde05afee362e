"""Files the project's CI configuration includes are protected paths too: a change touching one
stops in CREATE_FAILED (CREATE_PATH_REFUSED) before anyone is asked to approve and before
anything is committed; a re-apply with allowed paths goes on."""

from __future__ import annotations

from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot

CI = """
include:
  - local: /ci/deploy.yml
  - local: templates/*.yml
stages: [test]
"""


def seed_ci(bot: Bot) -> None:
    """The target branch's CI configuration, with a nested include."""
    bot.gitlab.push(
        PROJECT,
        "main",
        {
            ".gitlab-ci.yml": CI,
            "ci/deploy.yml": "include: ci/nested.yml\n",
            "ci/nested.yml": "deploy: {script: [make deploy]}\n",
        },
    )


def refused(bot: Bot, op_id: str) -> str:
    """Asserts the request stopped on a refused path; its error detail."""
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.CREATE_FAILED, Step.CREATE_PATH_REFUSED)
    return str(op["error_detail"])


def test_approve_first_never_asks_approvers_about_a_ci_include(bot: Bot) -> None:
    """A change to a file `.gitlab-ci.yml` includes is refused before the approval request."""
    seed_ci(bot)
    op_id = bot.request(Flow.APPROVE_FIRST, files=[{"path": "ci/deploy.yml", "content": "x\n"}])
    bot.settle()
    assert "ci/deploy.yml: is included by the CI configuration" in refused(bot, op_id)
    assert bot.approvals.submitted == []


def test_mr_first_commits_nothing_for_a_nested_or_wildcard_include(bot: Bot) -> None:
    """Nested (ci/nested.yml) and wildcard (templates/*.yml) includes are refused before the
    branch exists, so the MR pipeline never runs the changed CI file."""
    seed_ci(bot)
    for n, path in enumerate(("ci/nested.yml", "templates/release.yml")):
        op_id = bot.request(
            Flow.MR_FIRST, subject_id=f"svc-{n}", files=[{"path": path, "content": "x\n"}]
        )
        bot.settle()
        assert path in refused(bot, op_id)
        assert bot.gitlab.branch_head(PROJECT, f"gitops/{op_id}") is None
    assert bot.gitlab.project(PROJECT).mrs == {}
    assert bot.approvals.submitted == []


def test_a_persons_mr_touching_an_include_is_refused_before_approval(bot: Bot) -> None:
    """`/gitops apply` on an MR whose diff touches a CI include: no approval is requested."""
    seed_ci(bot)
    mr = bot.gitlab.open_mr(PROJECT, "feature/ci", files={"templates/build.yml": "evil: 1\n"})
    op_id = bot.apply_mr(mr.iid)
    bot.pass_pipeline(op_id)
    bot.settle()
    assert "templates/build.yml" in refused(bot, op_id)
    assert bot.approvals.submitted == []


def test_reapply_after_a_refused_path_goes_on(bot: Bot) -> None:
    """After the refusal, the same subject and target re-applied with an allowed file proceeds."""
    seed_ci(bot)
    first = bot.request(Flow.APPROVE_FIRST, files=[{"path": "ci/deploy.yml", "content": "x\n"}])
    bot.settle()
    refused(bot, first)
    again = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    assert bot.state(again) is S.APPROVAL_SENT
    assert [s["operation_id"] for s in bot.approvals.submitted] == [again]
