"""Checks and preview before approval: a changed file that does not parse, or breaks the JSON
Schema a rule names, stops the change in CREATE_FAILED with file:line:col before anyone is asked
to approve; a valid change shows its preview (files, +/- counts, the diff) in the status comment
and in the approval request, cut with a link to the MR's diffs, and inert."""

from __future__ import annotations

import json

import pytest

from bot.app.checks import ValidatorRule
from bot.app.steps import checks
from bot.core.inert import problems
from bot.core.states import BindingState as S
from bot.core.states import Flow, Step
from jobs.outbox import dispatch
from tests.builders import operation
from tests.workflow.harness import PROJECT, Bot

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"replicas": {"type": "integer", "maximum": 10}},
        "required": ["replicas"],
    }
)


def stopped(bot: Bot, op_id: str) -> str:
    """Asserts the change stopped on its checks with nobody asked; its error detail."""
    op = operation(bot.services.engine, op_id)
    assert (bot.state(op_id), op["step"]) == (S.CREATE_FAILED, Step.CREATE_CHECKS_FAILED)
    assert bot.approvals.submitted == []
    return str(op["error_detail"])


def status_note(bot: Bot, op_id: str) -> str:
    """The MR's status comment once the outbox has written it."""
    dispatch()
    mr = bot.gitlab.mr(PROJECT, operation(bot.services.engine, op_id)["mr_iid"])
    bodies = [n.body for n in mr.notes.values() if "GitOps" in n.body]
    assert len(bodies) == 1
    return bodies[0]


def mr_first(bot: Bot, files: list[dict[str, str]], subject: str = "service-a") -> str:
    """An MR-first change up to where it asks for approval (its MR's pipeline passed)."""
    op_id = bot.request(Flow.MR_FIRST, subject_id=subject, files=files)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    return op_id


@pytest.mark.parametrize(
    ("path", "content", "expected"),
    [
        ("config/prod.yaml", "replicas: 3\nports: [80\n", "config/prod.yaml:3:1: yaml: "),
        ("config/app.json", '{\n  "replicas": 3,\n}\n', "config/app.json:3:1: json: "),
        ("config/app.toml", "replicas = 3\nname = \n", "config/app.toml:2:8: toml: "),
        (  # nested past the limit: before, "unexpected RecursionError" and no position
            "config/deep.toml",
            "a = " + "[" * 600 + "]" * 600 + "\n",
            "config/deep.toml:1:68: toml: nested deeper than 64 levels",
        ),
        ("config/deep.json", "[" * 600 + "]" * 600, "config/deep.json:1:65: json: nested deeper"),
    ],
)
def test_a_file_that_does_not_parse_stops_before_approval(
    bot: Bot, path: str, content: str, expected: str
) -> None:
    """Approve-first: invalid YAML, JSON or TOML ends in CREATE_FAILED naming file:line:col."""
    op_id = bot.request(Flow.APPROVE_FIRST, files=[{"path": path, "content": content}])
    bot.settle()
    assert stopped(bot, op_id).startswith(expected)


def test_mr_first_shows_the_problems_and_the_preview_on_the_mr(bot: Bot) -> None:
    """MR-first: the MR exists, its pipeline passed; the check stops it before the approval
    request and its status comment lists each problem with the change's preview."""
    op_id = mr_first(
        bot,
        [
            {"path": "config/app.json", "content": '{"replicas": }'},
            {"path": "config/prod.yaml", "content": "replicas: 3\n"},
        ],
    )
    assert "config/app.json:1:14: json: Expecting value" in stopped(bot, op_id)
    note = status_note(bot, op_id)
    assert "config/app.json:1:14: json: Expecting value" in note
    assert "- update config/prod.yaml (+1 -1)" in note
    assert "re-apply" in note


def test_a_json_schema_violation_stops_with_the_values_position(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rule names a schema in the repository: a YAML value breaking it is reported at its
    line and column, a JSON one too; nobody is asked to approve."""
    bot.gitlab.push(PROJECT, "main", {"schemas/app.json": SCHEMA})
    rules = [ValidatorRule("config/**", "schemas/app.json")]
    monkeypatch.setattr(checks, "rules_for", lambda op: rules)
    files = [
        {"path": "config/prod.yaml", "content": "# scaled\nreplicas: 30\n"},
        {"path": "config/app.json", "content": '{\n  "replicas": "many"\n}\n'},
    ]
    op_id = bot.request(Flow.APPROVE_FIRST, files=files)
    bot.settle()
    detail = stopped(bot, op_id)
    assert "config/prod.yaml:2:11: schema schemas/app.json: 30 is greater than" in detail
    assert "config/app.json:2:15: schema schemas/app.json: 'many' is not of type" in detail


def test_a_missing_schema_is_a_problem_naming_it(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule naming a schema file the repository does not hold stops the change, naming it."""
    monkeypatch.setattr(checks, "rules_for", lambda op: [ValidatorRule("config/*", "s.json")])
    op_id = bot.request(Flow.APPROVE_FIRST)
    bot.settle()
    assert stopped(bot, op_id) == "s.json:1:1: schema: the schema file does not exist"


def test_a_valid_change_shows_its_preview_to_the_approvers_and_on_the_mr(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change whose files pass (a schema too) is asked for approval with its diffstat and diff;
    its status comment shows the same files and the diff collapsed."""
    bot.gitlab.push(PROJECT, "main", {"schemas/app.json": SCHEMA})
    monkeypatch.setattr(
        checks, "rules_for", lambda op: [ValidatorRule("config/*", "schemas/app.json")]
    )
    files = [
        {"path": "config/prod.yaml", "content": "replicas: 3\n"},
        {"path": "config/new.json", "content": '{"replicas": 2}\n'},
    ]
    op_id = mr_first(bot, files)
    assert bot.state(op_id) is S.APPROVAL_SENT
    [submitted] = bot.approvals.submitted
    description: str = submitted["description"]
    assert "- update config/prod.yaml (+1 -1)" in description
    assert "- create config/new.json (+1 -0)" in description
    assert "-replicas: 1\n+replicas: 3" in description
    note = status_note(bot, op_id)
    assert "**Preview:** 2 files, +2 -1" in note
    assert "- update config/prod.yaml (+1 -1)" in note
    assert "<details><summary>Diff</summary>" in note
    assert "> -replicas: 1\n> +replicas: 3" in note
    assert "cut short" not in note


def test_a_long_diff_is_cut_with_a_link_to_the_mrs_diffs(bot: Bot) -> None:
    """Past the limit the diff is cut, and the comment and the request say where the rest is."""
    content = "".join(f"key{n}: {n}\n" for n in range(400))
    op_id = mr_first(bot, [{"path": "config/big.yaml", "content": content}])
    op = operation(bot.services.engine, op_id)
    note = status_note(bot, op_id)
    assert f"[the whole diff]({op['mr_url']}/diffs) is on the merge request" in note
    assert "key150: 150" in note
    assert "key300: 300" not in note
    assert "- create config/big.yaml (+400 -0)" in note
    [submitted] = bot.approvals.submitted
    assert f"{op['mr_url']}/diffs" in submitted["description"]


HOSTILE = "\n".join(
    (
        "/merge",
        "@all look here",
        "```",
        "````` </details> <script>x</script>",
        "/approve",
        " /label ~x",
        "</details>",
        "\u202eevil",
    )
)


def test_a_hostile_diff_stays_inert(bot: Bot) -> None:
    """Lines that would be quick actions, mentions, fences or HTML in a changed file are shown
    as plain diff text: no line of the comment starts with `/`, nothing mentions anyone, the
    fence outlasts every backtick run and `</details>` does not end the block early."""
    bot.gitlab.push(PROJECT, "main", {"docs/notes.txt": " /label ~x\n"})
    op_id = mr_first(bot, [{"path": "docs/notes.txt", "content": HOSTILE + "\n"}])
    note = status_note(bot, op_id)
    assert problems(note) == []
    assert not any(line.lstrip().startswith("/") for line in note.split("\n"))
    lines = note.split("\n")
    start = lines.index("<details><summary>Diff</summary>")
    end = lines.index("</details>")
    block = lines[start + 1 : end]
    assert block[1] == "> ``````diff"  # longer than the five backticks in the file
    assert "> ``````" in block
    assert all(line.startswith("> ") for line in block if line)
    assert "> +/merge" in block
    assert "> +@all look here" in block
    assert "> +[U+202E]evil" in block
    assert "+[U+202E]evil" in bot.approvals.submitted[0]["description"]  # approvers see it too
    assert sum(1 for line in lines if line.strip() == "</details>") == 1


def test_deleted_files_are_not_validated(bot: Bot) -> None:
    """A change deleting a file that would not parse goes on to approval."""
    bot.gitlab.push(PROJECT, "main", {"config/old.json": "{broken"})
    op_id = bot.request(Flow.APPROVE_FIRST, files=[{"path": "config/old.json", "action": "delete"}])
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    description = bot.approvals.submitted[0]["description"]
    assert "- delete config/old.json (+0 -1)" in description


def test_a_persons_mr_is_checked_at_its_head(bot: Bot) -> None:
    """`/gitops apply` on a person's MR: its files are read at the head its pipeline passed on,
    and one that does not parse stops it before the approval request."""
    mr = bot.gitlab.open_mr(PROJECT, "feature/x", files={"config/prod.yaml": "replicas: [3\n"})
    op_id = bot.apply_mr(mr.iid)
    bot.pass_pipeline(op_id)
    bot.settle()
    assert stopped(bot, op_id).startswith("config/prod.yaml:2:1: yaml: ")
    assert "- update config/prod.yaml (+1 -1)" in status_note(bot, op_id)


def test_every_file_of_a_persons_mr_is_checked_not_the_first_fifty(bot: Bot) -> None:
    """A person's MR with 60 files, the last in path order broken: it is read and checked like
    the first (before, files past the 50th went to approval unchecked); the preview still
    counts lines for the first 50 only and lists the rest."""
    files = {f"config/f{n:02}.yaml": "replicas: 2\n" for n in range(59)}
    files["config/f59.yaml"] = "replicas: [2\n"
    mr = bot.gitlab.open_mr(PROJECT, "feature/many", files=files)
    op_id = bot.apply_mr(mr.iid)
    bot.pass_pipeline(op_id)
    bot.settle()
    assert stopped(bot, op_id).startswith("config/f59.yaml:2:1: yaml: ")
    listed = operation(bot.services.engine, op_id)["preview"]["files"]
    assert len(listed) == 60
    assert listed[49]["added"] == 1
    assert listed[59] == {
        "path": "config/f59.yaml",
        "action": "write",
        "added": None,
        "removed": None,
    }


def test_a_persons_mr_past_the_checked_file_limit_stops_with_the_reason(bot: Bot) -> None:
    """More files than are checked before approval: the change stops there, saying how many
    and what to do, without reading them and without anyone asked to approve."""
    files = {f"config/f{n:03}.yaml": "replicas: 2\n" for n in range(checks.MAX_CHECKED_FILES + 1)}
    mr = bot.gitlab.open_mr(PROJECT, "feature/huge", files=files)
    op_id = bot.apply_mr(mr.iid)
    bot.pass_pipeline(op_id)
    bot.settle()
    assert stopped(bot, op_id) == (
        f"the merge request changes {checks.MAX_CHECKED_FILES + 1} files; at most "
        f"{checks.MAX_CHECKED_FILES} are checked before approval: split it into smaller merge "
        "requests"
    )
    note = status_note(bot, op_id)
    assert "split it into smaller merge requests" in note
    assert f"- write config/f{checks.MAX_CHECKED_FILES:03}.yaml" in note
