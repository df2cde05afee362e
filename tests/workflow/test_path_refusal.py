"""Files the project's CI configuration includes are protected paths too: a change touching one
stops in CREATE_FAILED (CREATE_PATH_REFUSED) before anyone is asked to approve and before
anything is committed, naming the include that reaches it, whatever form that include takes
(FORMS); a CI configuration the bot cannot walk to the end refuses every change (fail closed);
a re-apply with allowed paths goes on."""

from __future__ import annotations

import pytest

from bot.app.ci_walk import MAX_FILES
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


#: Every include form that reaches a file of this repository, each as (what the target branch
#: holds, a path it protects, the include named in the refusal); "ci_config_path" sets the
#: project's custom CI/CD configuration file.
FORMS: dict[str, tuple[dict[str, str], str, str]] = {
    "project": (
        {".gitlab-ci.yml": "include: {project: Platform/Config, ref: v2, file: ci/shared.yml}\n"},
        "ci/shared.yml",
        "include:project in .gitlab-ci.yml",
    ),
    "component": (
        {".gitlab-ci.yml": "include: [{component: gitlab.example.com/platform/config/deploy@1}]\n"},
        "templates/deploy.yml",
        "include:component in .gitlab-ci.yml",
    ),
    "trigger": (
        {".gitlab-ci.yml": "child:\n  trigger:\n    include: ci/child.yml\n"},
        "ci/child.yml",
        "trigger:include:local of job child in .gitlab-ci.yml",
    ),
    "wildcard": (
        {".gitlab-ci.yml": "include: ci/parts/*.yml\n", "ci/parts/a.yml": "a: {script: [a]}\n"},
        "ci/parts/b.yml",
        "include:local in .gitlab-ci.yml",
    ),
    "variable": (
        {".gitlab-ci.yml": "include: {local: 'ci/$ENVIRONMENT/deploy.yml'}\n"},
        "ci/production/deploy.yml",
        "include:local in .gitlab-ci.yml",
    ),
    "twelve deep": (
        {
            ".gitlab-ci.yml": "include: ci/0.yml\n",
            **{f"ci/{n}.yml": f"include: ci/{n + 1}.yml\n" for n in range(12)},
        },
        "ci/12.yml",
        "include:local in ci/11.yml",
    ),
    "ci_config_path": (
        {"ci_config_path": "ci/main.yml", "ci/main.yml": "include: ci/jobs.yml\n"},
        "ci/main.yml",
        "the project's CI/CD configuration file setting",
    ),
    "ci_config_path include": (
        {"ci_config_path": "ci/main.yml", "ci/main.yml": "include: ci/jobs.yml\n"},
        "ci/jobs.yml",
        "include:local in ci/main.yml",
    ),
}


def seed_form(bot: Bot, form: str) -> tuple[str, str]:
    """The target branch's CI configuration of FORMS[form]; (the path, the include naming it)."""
    files, path, origin = FORMS[form]
    setting = files.get("ci_config_path")
    if setting is not None:
        bot.gitlab.set_ci_config_path(PROJECT, setting)
    bot.gitlab.push(PROJECT, "main", {k: v for k, v in files.items() if k != "ci_config_path"})
    return path, origin


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


@pytest.mark.parametrize("form", sorted(FORMS))
def test_approve_first_refuses_a_file_any_include_form_reaches(bot: Bot, form: str) -> None:
    """The API's change to a file reached by `include:project` of this project, a component, a
    child pipeline, a wildcard, a variable, twelve nested includes or a custom
    `ci_config_path`: refused before approval, naming the include and the file holding it."""
    path, origin = seed_form(bot, form)
    op_id = bot.request(Flow.APPROVE_FIRST, files=[{"path": path, "content": "evil: 1\n"}])
    bot.settle()
    detail = refused(bot, op_id)
    assert f"{path}: is included by the CI configuration" in detail
    assert f"named by {origin}" in detail
    assert bot.approvals.submitted == []


@pytest.mark.parametrize("form", ["project", "trigger", "twelve deep", "ci_config_path include"])
def test_a_persons_mr_touching_a_file_any_include_form_reaches_is_refused(
    bot: Bot, form: str
) -> None:
    """`/gitops apply` on a person's MR changing such a file: no approval is requested."""
    path, origin = seed_form(bot, form)
    mr = bot.gitlab.open_mr(PROJECT, "feature/ci", files={path: "evil: 1\n"})
    op_id = bot.apply_mr(mr.iid)
    bot.pass_pipeline(op_id)
    bot.settle()
    assert f"named by {origin}" in refused(bot, op_id)
    assert bot.approvals.submitted == []


UNRESOLVED: dict[str, tuple[dict[str, str], str]] = {
    "over budget": (
        {
            ".gitlab-ci.yml": "include:\n" + "".join(f"  - ci/{n}.yml\n" for n in range(151)),
            **{f"ci/{n}.yml": "x: 1\n" for n in range(151)},
        },
        f"more than {MAX_FILES} included files",
    ),
    "unparseable": (
        {".gitlab-ci.yml": "include: ci/broken.yml\n", "ci/broken.yml": "a: [b\nc: 1\n"},
        "ci/broken.yml:",
    ),
    "unreadable project": (
        {"ci_config_path": "ci.yml@secret/ci"},
        "names secret/ci, which the bot cannot read",
    ),
    "unknown form": ({".gitlab-ci.yml": "include: [{local: [a.yml]}]\n"}, "not a string"),
}


@pytest.mark.parametrize("case", sorted(UNRESOLVED))
def test_a_ci_configuration_the_bot_cannot_walk_refuses_every_change(bot: Bot, case: str) -> None:
    """Over GitLab's 150 includes, an included file that cannot be parsed, a `ci_config_path` in
    a project the bot cannot read, a form it cannot resolve: even an ordinary change is refused
    with the reason, nobody is asked, nothing is committed (fail closed)."""
    files, reason = UNRESOLVED[case]
    bot.gitlab.add_project("secret/ci", files={"ci.yml": "x: 1\n"}, visibility="private")
    if "ci_config_path" in files:
        bot.gitlab.set_ci_config_path(PROJECT, files["ci_config_path"])
    bot.gitlab.push(PROJECT, "main", {k: v for k, v in files.items() if k != "ci_config_path"})
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    detail = refused(bot, op_id)
    assert detail.startswith("the CI configuration cannot be checked, so no path can be: ")
    assert reason in detail
    assert bot.approvals.submitted == []
    assert bot.gitlab.branch_head(PROJECT, f"gitops/{op_id}") is None
