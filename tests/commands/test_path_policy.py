"""`/gitops apply` and `/gitops revert` refuse protected and disallowed paths, as the API does."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from bot.core.states import Flow
from bot.store.models import OPERATIONS
from tests.commands import (
    AUTHOR,
    audit_rows,
    awards,
    mr_iid_of,
    operations_of,
    person_mr,
    replies,
    running_bot,
    say,
)
from tests.workflow.harness import PROJECT, Bot
from tests.workflow.test_path_refusal import FORMS, seed_form

CI_WITH_INCLUDE = "include:\n  - local: ci/deploy.yml\nbuild:\n  script: [make]\n"


def assert_refused_naming(bot: Bot, iid: int, note_id: int, path: str) -> str:
    """🚫, one reply naming `path` in a code span (never at the start of a line), an audit row
    naming it; the reply."""
    assert awards(bot, iid, note_id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert f"`{path}`" in reply
    assert not any(line.lstrip().startswith(("/", path)) for line in reply.splitlines())
    [row] = audit_rows(bot, f"note:{note_id}")
    assert row["detail"].startswith("refused: ")
    assert path in row["detail"]
    return reply


@pytest.mark.parametrize(
    "path", [".gitlab-ci.yml", ".gitlab/x", "CODEOWNERS", "docs/CODEOWNERS", ".gitattributes"]
)
def test_apply_of_an_mr_touching_a_protected_path_is_refused(bot: Bot, path: str) -> None:
    """An MR that also changes a protected path is refused at apply time, naming the path, and
    no request is created."""
    iid = person_mr(bot, files={"config/prod.yaml": "replicas: 3\n", path: "changed\n"})
    note = say(bot, AUTHOR, "/gitops apply", iid)
    reply = assert_refused_naming(bot, iid, note.id, path)
    assert "this merge request changes paths the bot may not change" in reply
    assert "is a protected path" in reply
    assert operations_of(bot, iid) == []
    assert bot.approvals.submitted == []


def test_apply_of_an_mr_touching_a_ci_local_include_is_refused(bot: Bot) -> None:
    """A file the target branch's CI configuration includes locally is protected too."""
    bot.gitlab.push(PROJECT, "main", {".gitlab-ci.yml": CI_WITH_INCLUDE, "ci/deploy.yml": "a\n"})
    iid = person_mr(bot, files={"ci/deploy.yml": "deploy: everything\n"})
    note = say(bot, AUTHOR, "/gitops apply", iid)
    reply = assert_refused_naming(bot, iid, note.id, "ci/deploy.yml")
    assert "is included by the CI configuration" in reply
    assert operations_of(bot, iid) == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_apply_of_an_mr_touching_a_file_any_include_form_reaches_is_refused(
    bot: Bot, form: str
) -> None:
    """`include:project` of this project, a component, a child pipeline, a wildcard, a
    variable, twelve nested includes, a custom `ci_config_path` and what it includes: refused
    at apply time, the reply naming the path and the include that reaches it."""
    path, origin = seed_form(bot, form)
    iid = person_mr(bot, files={path: "evil: 1\n"})
    note = say(bot, AUTHOR, "/gitops apply", iid)
    reply = assert_refused_naming(bot, iid, note.id, path)
    assert f"named by {origin}" in reply
    assert operations_of(bot, iid) == []


def test_apply_under_a_ci_configuration_the_bot_cannot_read_is_refused(bot: Bot) -> None:
    """An included file that cannot be parsed: no path can be checked, so the apply is
    refused with the reason (fail closed) and no request is created."""
    bot.gitlab.push(
        PROJECT, "main", {".gitlab-ci.yml": "include: ci/x.yml\n", "ci/x.yml": "a: [b\n"}
    )
    iid = person_mr(bot)
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "the CI configuration cannot be checked" in reply
    assert "ci/x.yml" in reply
    assert operations_of(bot, iid) == []


def test_a_deleted_protected_file_is_refused_too(bot: Bot) -> None:
    """Deleting `.gitattributes` is a change to it: refused like an edit."""
    bot.gitlab.push(PROJECT, "main", {".gitattributes": "* text=auto\n"})
    iid = person_mr(bot, files={".gitattributes": None, "config/prod.yaml": "replicas: 2\n"})
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert_refused_naming(bot, iid, note.id, ".gitattributes")
    assert operations_of(bot, iid) == []


def test_a_protected_path_listed_explicitly_may_be_applied(db: Engine) -> None:
    """GITOPS_ALLOWED_PATHS naming `.gitlab-ci.yml` itself lets an MR change it (with config/);
    another protected path stays refused."""
    with running_bot(db, allowed_paths=("config/", ".gitlab-ci.yml")) as bot:
        other = person_mr(bot, "owners", files={"config/a.yaml": "a\n", "CODEOWNERS": "* @x\n"})
        refused = say(bot, AUTHOR, "/gitops apply", other)
        assert_refused_naming(bot, other, refused.id, "CODEOWNERS")
        iid = person_mr(bot, files={"config/prod.yaml": "replicas: 3\n", ".gitlab-ci.yml": "x\n"})
        note = say(bot, AUTHOR, "/gitops apply", iid)
        assert awards(bot, iid, note.id) == ["eyes"]
        [op] = operations_of(bot, iid)
        assert bot.state(op["id"]) is S.MR_CREATING


def test_apply_outside_the_allowed_paths_is_refused(db: Engine) -> None:
    """With GITOPS_ALLOWED_PATHS set, an MR changing a path outside it is refused, naming it."""
    with running_bot(db, allowed_paths=("config/",)) as bot:
        iid = person_mr(bot, files={"config/prod.yaml": "replicas: 3\n", "src/app.py": "x\n"})
        note = say(bot, AUTHOR, "/gitops apply", iid)
        assert_refused_naming(bot, iid, note.id, "src/app.py")
        assert operations_of(bot, iid) == []


def test_an_odd_path_is_named_inertly(bot: Bot) -> None:
    """A protected path carrying backticks, a mention and a bidi control is shown in one code
    span that nothing in it can end: no live mention, no control character, no new line."""
    path = ".gitlab/`x` @all \u202e.yml"
    iid = person_mr(bot, files={path: "x\n"})
    note = say(bot, AUTHOR, "/gitops apply", iid)
    assert awards(bot, iid, note.id) == ["no_entry_sign"]
    [reply] = replies(bot, iid)
    assert "``.gitlab/`x` @all [U+202E].yml``" in reply
    assert "\u202e" not in reply
    assert operations_of(bot, iid) == []


def validated_change(bot: Bot, files: list[dict[str, str]]) -> tuple[int, str]:
    """An approve-first change writing `files`, carried to VALIDATED; (its MR's iid, its id)."""
    op_id = bot.request(Flow.APPROVE_FIRST, files=files)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    bot.pass_pipeline(op_id)
    bot.settle()
    bot.deployed(op_id)
    bot.settle()
    assert bot.state(op_id) is S.VALIDATED
    return mr_iid_of(bot, op_id), op_id


def reverts_of(bot: Bot, op_id: str) -> list[str]:
    """Ids of the revert requests of an operation."""
    query = select(OPERATIONS.c.id).where(OPERATIONS.c.reverts_operation_id == op_id)
    with bot.services.engine.connect() as conn:
        return list(conn.execute(query).scalars())


def test_revert_that_would_write_a_ci_include_is_refused(bot: Bot) -> None:
    """A change wrote `ci/jobs.yml`; since then the CI configuration includes it: reverting it
    would change what CI runs, so the revert is refused naming it and nothing starts."""
    iid, op_id = validated_change(bot, [{"path": "ci/jobs.yml", "content": "jobs: 2\n"}])
    ci = "include:\n  - local: /ci/jobs.yml\n"
    bot.gitlab.push(PROJECT, "main", {".gitlab-ci.yml": ci})
    note = say(bot, "maria", "/gitops revert", iid)
    reply = assert_refused_naming(bot, iid, note.id, "ci/jobs.yml")
    assert "the revert would write paths the bot may not change" in reply
    assert reverts_of(bot, op_id) == []
    assert bot.state(op_id) is S.VALIDATED


def test_revert_outside_the_allowed_paths_is_refused(db: Engine) -> None:
    """A change made before GITOPS_ALLOWED_PATHS narrowed cannot be reverted through the bot
    once its path is outside them."""
    with running_bot(db) as bot:
        iid, op_id = validated_change(bot, [{"path": "src/app.py", "content": "x = 2\n"}])
        bot.services.settings = replace(bot.settings, allowed_paths=("config/",))
        note = say(bot, "maria", "/gitops revert", iid)
        assert_refused_naming(bot, iid, note.id, "src/app.py")
        assert reverts_of(bot, op_id) == []
