"""MR commands with GITOPS_PROJECTS set: commands on a project not listed are ignored."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from tests.commands import (
    AUTHOR,
    audit_rows,
    awards,
    deliver_forged,
    operations_of,
    person_mr,
    replies,
    running_bot,
    say,
)
from tests.workflow.harness import PROJECT, Bot

IGNORED = "ignored: its project is not in GITOPS_PROJECTS"


def test_a_command_on_a_project_not_listed_is_ignored(db: Engine) -> None:
    """A Maintainer's `/gitops apply` on a project GITOPS_PROJECTS does not list: no request, no
    reaction, no reply, an audit row; GitLab is not even asked about the note."""
    with running_bot(db, projects=("other/repo",)) as bot:
        iid = person_mr(bot)
        note = say(bot, "maria", "/gitops apply", iid)
        assert operations_of(bot, iid) == []
        assert awards(bot, iid, note.id) == []
        assert replies(bot, iid) == []
        [row] = audit_rows(bot, f"note:{note.id}:ignored")
        assert (row["detail"], row["actor"]) == (IGNORED, "maria")
        assert bot.gitlab.count("GET", f"/notes/{note.id}") == 0


def other_project(bot: Bot, path: str) -> int:
    """Another project with the bot and the people as members, and an MR by the author; its iid."""
    bot.gitlab.add_project(path, files={"config/prod.yaml": "replicas: 1\n"})
    for name, level in (("gitops-bot", 40), ("maria", 40), (AUTHOR, 30)):
        bot.gitlab.add_member(path, name, level)
    files = {"config/prod.yaml": "replicas: 9\n"}
    return bot.gitlab.open_mr(path, "feature", author=AUTHOR, files=files).iid


@pytest.mark.parametrize("listed", ["PLATFORM/Config", "id"])
def test_only_listed_projects_run_commands(db: Engine, listed: str) -> None:
    """Listed by its path in another case, or by its numeric id, the project's commands run; in
    the same bot, a command on a project not listed is ignored."""
    with running_bot(db, projects=("other/repo", listed)) as bot:
        if listed == "id":  # the id is known once the double holds the project
            project_id = str(bot.gitlab.project(PROJECT).id)
            bot.services.settings = replace(bot.settings, projects=("other/repo", project_id))
        iid = person_mr(bot)
        note = say(bot, AUTHOR, "/gitops apply", iid)
        assert awards(bot, iid, note.id) == ["eyes"]
        [op] = operations_of(bot, iid)
        assert bot.state(op["id"]) is S.MR_CREATING
        third = other_project(bot, "third/repo")
        elsewhere = bot.gitlab.add_note("third/repo", third, "maria", "/gitops apply")
        deliver_forged(bot, third, elsewhere.id, lambda _: None, project="third/repo")
        bot.settle()
        assert bot.gitlab.mr("third/repo", third).notes[elsewhere.id].awards == []
        [row] = audit_rows(bot, f"note:{elsewhere.id}:ignored")
        assert row["detail"] == IGNORED


def test_a_forged_path_does_not_bring_a_project_onto_the_list(db: Engine) -> None:
    """A hook from a project not listed that names a listed project's path: GitLab says which
    project the MR is in, and the command is ignored."""
    with running_bot(db, projects=(PROJECT,)) as bot:
        iid = other_project(bot, "other/repo")
        note = bot.gitlab.add_note("other/repo", iid, "maria", "/gitops apply")

        def forge(payload: dict[str, Any]) -> None:
            payload["project"]["path_with_namespace"] = PROJECT

        deliver_forged(bot, iid, note.id, forge, project="other/repo")
        bot.settle()
        assert operations_of(bot, iid) == []
        assert bot.gitlab.mr("other/repo", iid).notes[note.id].awards == []
        [row] = audit_rows(bot, f"note:{note.id}:ignored")
        assert row["detail"] == IGNORED
