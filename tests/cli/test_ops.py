"""The operator's commands (`gitops-bot show|list|retry|cancel|flags|reconcile|hooks`) against
the suite's database and the GitLab double, run through click's CliRunner with GITOPS_* set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.gitlab.protection import ProtectionResult, Verdict
from bot.store.fire import fire
from bot.store.flags import DEFAULTS, get_flag
from bot.store.hooks import last_report
from bot.store.models import AUDIT, DEPLOY_SIGNALS, utcnow
from bot.store.submit import submit
from bot.store.sweep import overdue
from gitops_bot import ops_hooks
from sim.gitlab import ApiError, GitLabDouble
from tests.api import FakeQueue
from tests.builders import OUTBOX, binding_state, count, make_operation, make_request, operation
from tests.cli import AUTHOR_TOKEN, GITLAB, PUBLIC, REDIS_URL, WEBHOOK_SECRET, Run
from tests.pages import set_times

RECEIVER = f"{PUBLIC}/webhooks/gitlab"
PROJECT = "platform/config"


@pytest.fixture
def double() -> GitLabDouble:
    """GitLab with the managed project and the author bot as its maintainer."""
    gitlab = GitLabDouble(GITLAB)
    gitlab.add_project(PROJECT)
    gitlab.add_user("gitops-bot", token=AUTHOR_TOKEN, access={PROJECT: 40})
    return gitlab


def failed_operation(db: Engine, **kw: str) -> str:
    """A request that failed while merging, with the error GitLab gave."""
    op_id = make_operation(db, S.MERGING, **kw)
    fire(
        db,
        TransitionRequest(op_id, E.MERGE_ERROR, changes={"error_detail": "405 Method Not Allowed"}),
    )
    return op_id


# -- show and list --------------------------------------------------------------------------------


def test_show_prints_phase_step_hint_error_and_timeline(db: Engine, run: Run) -> None:
    """`show` lists the facts and every transition, the current state's time "so far"."""
    op_id = failed_operation(db, title="Bump replicas")

    result = run("show", op_id)

    assert result.exit_code == 0, result.output
    out = result.output
    assert f"Operation     {op_id}" in out
    assert "Phase         Failed (HANDLE_FAILED)" in out
    assert "Step          HANDLE_MERGE_FAILED (10106)" in out
    assert "Hint          Failed while merging the merge request." in out
    assert "Error         405 Method Not Allowed" in out
    assert "(new) -> APPROVAL_SENDING" in out
    assert "MERGING -> HANDLE_FAILED" in out
    assert out.rstrip().endswith("so far")
    assert len([line for line in out.splitlines() if " -> " in line and ":" in line]) == 7


def test_show_json_and_mermaid(db: Engine, run: Run) -> None:
    """`--json` gives seconds in each state for scripts; `--mermaid` adds the path diagram."""
    op_id = failed_operation(db)

    data = json.loads(run("show", op_id, "--json").output)
    diagram = run("show", op_id, "--mermaid").output

    assert data["phase"] == "HANDLE_FAILED"
    assert data["step_code"] == 10106
    assert data["hint"]["kind"] == "failed"
    assert data["error"] == "405 Method Not Allowed"
    assert [entry["event"] for entry in data["timeline"]][-1] == "merge_error"
    assert all(entry["seconds_in_state"] >= 0 for entry in data["timeline"])
    assert "stateDiagram-v2" in diagram
    assert "MERGING --> HANDLE_FAILED : merge_error" in diagram


def test_show_of_an_unknown_id_fails_clearly(run: Run) -> None:
    """An id nobody has: exit 1 naming it."""
    result = run("show", "no-such-operation")
    assert result.exit_code == 1
    assert "no operation has the id 'no-such-operation'" in result.output


def test_list_filters_by_state(db: Engine, run: Run) -> None:
    """`list --state` shows only those states (any case); no filter shows every current one."""
    merging = make_operation(db, S.MERGING)
    failed = failed_operation(db)
    done = make_operation(db, S.VALIDATED)

    only_failed = run("list", "--state", "HANDLE_FAILED")
    two = run("list", "--state", "merging", "--state", "validated")
    everything = json.loads(run("list", "--json").output)

    assert only_failed.exit_code == 0, only_failed.output
    assert failed in only_failed.output
    assert merging not in only_failed.output
    assert only_failed.output.splitlines()[0].split() == [
        "OPERATION",
        "STATE",
        "STEP",
        "AGE",
        "SUBJECT",
        "->",
        "TARGET",
        "MR",
    ]
    assert {merging, done} == {line.split()[0] for line in two.output.splitlines()[1:]}
    assert {row["operation_id"] for row in everything} == {merging, failed, done}
    assert run("list", "--state", "SIDEWAYS").exit_code == 2


def test_commands_on_an_unmigrated_database_say_what_to_do(tmp_path: Path, run: Run) -> None:
    """An empty database gives one line pointing at `gitops-bot db upgrade`, not a traceback."""
    result = run("list", GITOPS_DATABASE_URL=f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    assert result.exit_code == 1
    assert "gitops-bot db upgrade" in result.output
    assert "Traceback" not in result.output


# -- retry and cancel -----------------------------------------------------------------------------


def test_retry_moves_a_failed_request_and_the_sweep_picks_it_up(db: Engine, run: Run) -> None:
    """Embedded default: RETRY is fired as the operator and the deadline set for the sweep."""
    op_id = failed_operation(db)

    result = run("retry", op_id, "--actor", "cli:olivia")

    assert result.exit_code == 0, result.output
    assert f"retry: {op_id} HANDLE_FAILED -> MERGING (HANDLE_STARTED 10101)" in result.output
    assert "next sweep drives it" in result.output
    assert binding_state(db, op_id) is S.MERGING
    with db.connect() as conn:
        last = conn.execute(
            select(AUDIT.c.source, AUDIT.c.actor).order_by(AUDIT.c.id.desc()).limit(1)
        ).one()
    assert tuple(last) == ("operator", "cli:olivia")
    assert operation(db, op_id)["attempts"] == 0
    assert op_id in [row[0] for row in overdue(db, utcnow() + timedelta(seconds=1), 600)]


def test_retry_of_a_merged_change_says_it_waits_for_the_deployment(db: Engine, run: Run) -> None:
    """A merged change is not swept: the retry says it waits for the deployment's word."""
    op_id = make_operation(db, S.MERGED)

    result = run("retry", op_id)

    assert result.exit_code == 0, result.output
    assert "MERGED -> MERGED (HANDLE_MERGED 10103)" in result.output
    assert "waits for the deployment's word" in result.output


def test_retry_with_redis_enqueues_the_drive_job(db: Engine, run: Run, queue: FakeQueue) -> None:
    """With a Redis queue configured, the retry enqueues the drive job for the operation."""
    op_id = failed_operation(db)

    result = run("retry", op_id, GITOPS_REDIS_URL=REDIS_URL)

    assert result.exit_code == 0, result.output
    assert "drive job queued" in result.output
    assert queue.drives() == [op_id]


def test_retry_of_a_finished_request_is_refused(db: Engine, run: Run) -> None:
    """A validated request cannot be retried: exit 1, the reason, the state unchanged."""
    op_id = make_operation(db, S.VALIDATED)

    result = run("retry", op_id)

    assert result.exit_code == 1
    assert f"cannot retry {op_id}: it is VALIDATED" in result.output
    assert "retry is allowed in" in result.output
    assert binding_state(db, op_id) is S.VALIDATED


def test_retry_of_a_replaced_request_is_refused(db: Engine, run: Run) -> None:
    """A request replaced by a re-apply is not acted on; the message says to use the new one."""
    old = make_operation(db, S.REJECTED, subject_id="svc-again")
    submit(db, make_request(subject_id="svc-again"))

    result = run("retry", old)

    assert result.exit_code == 1
    assert "a newer request for the same subject and target replaced it" in result.output


def test_cancel_closes_and_queues_the_withdrawal(db: Engine, run: Run) -> None:
    """`cancel` fires CANCEL as the operator: CLOSED, with the outbox effects written."""
    op_id = make_operation(db, S.MERGING)
    before = count(db, OUTBOX, op_id)

    result = run("cancel", op_id)

    assert result.exit_code == 0, result.output
    assert f"cancel: {op_id} MERGING -> CLOSED (CLOSE_CANCELLED 10203)" in result.output
    assert binding_state(db, op_id) is S.CLOSED
    assert count(db, OUTBOX, op_id) > before


@pytest.mark.parametrize("state", [S.MERGED, S.VALIDATED])
def test_cancel_after_the_merge_is_refused(db: Engine, run: Run, state: S) -> None:
    """A merged or validated change cannot be cancelled (revert it): exit 1, unchanged."""
    op_id = make_operation(db, state)

    result = run("cancel", op_id)

    assert result.exit_code == 1
    assert f"cannot cancel {op_id}: it is {state.value}" in result.output
    assert binding_state(db, op_id) is state


def test_cancel_of_an_unknown_id_is_refused(run: Run) -> None:
    """An unknown id: exit 1 naming it."""
    result = run("cancel", "00000000-0000-0000-0000-000000000000")
    assert result.exit_code == 1
    assert "no operation has the id" in result.output


# -- flags ----------------------------------------------------------------------------------------


def test_flags_list_get_and_set(db: Engine, run: Run) -> None:
    """Every flag is listed; a set value (JSON or text) is read back and marked as set."""
    listing = run("flags")
    assert listing.exit_code == 0, listing.output
    assert {line.split()[0] for line in listing.output.splitlines()[1:]} == set(DEFAULTS)
    assert "default" in listing.output

    assert run("flags", "set", "workflow.order", "mr_first").exit_code == 0
    assert run("flags", "set", "poll.pipeline_tiers", "[[5,3],[60,10]]").exit_code == 0

    assert run("flags", "get", "workflow.order").output.strip() == '"mr_first"'
    assert get_flag(db, "poll.pipeline_tiers") == [[5, 3], [60, 10]]
    as_json = json.loads(run("flags", "--json").output)
    assert as_json["workflow.order"] == "mr_first"
    line = next(x for x in run("flags").output.splitlines() if x.startswith("workflow.order"))
    assert "set " in line


@pytest.mark.parametrize(
    ("key", "value"),
    [("queue.max_length", "lots"), ("workflow.order", "sideways"), ("poll.rebase_tiers", "[]")],
)
def test_flags_set_refuses_a_bad_value_and_keeps_the_old(
    db: Engine, run: Run, key: str, value: str
) -> None:
    """A value of the wrong shape: exit 1 with what the flag expects; the value is unchanged."""
    result = run("flags", "set", key, value)

    assert result.exit_code == 1
    assert "refused" in result.output
    assert key in result.output
    assert get_flag(db, key) == DEFAULTS[key]


def test_unknown_flags_are_refused(run: Run) -> None:
    """Getting or setting a flag that does not exist: exit 1 listing the real ones."""
    for args in (("flags", "get", "no.such"), ("flags", "set", "no.such", "1")):
        result = run(*args)
        assert result.exit_code == 1
        assert "unknown flag 'no.such'" in result.output
        assert "workflow.order" in result.output


# -- reconcile ------------------------------------------------------------------------------------


def test_reconcile_dry_run_reports_and_changes_nothing(db: Engine, run: Run) -> None:
    """--dry-run sorts merged changes into exact/unmatched; the real run validates the exact one."""
    signalled = make_operation(db, S.MERGED)
    silent = make_operation(db, S.MERGED, subject_id="svc-silent", project="other/app")
    for op_id in (signalled, silent):
        set_times(db, op_id, merged_at=utcnow() - timedelta(hours=1))
    with db.begin() as conn:
        conn.execute(
            insert(DEPLOY_SIGNALS).values(
                source="deploy",
                project_id=PROJECT,
                mr_iid=7,
                operation_id=signalled,
                sha=None,
                status="success",
                received_at=utcnow() - timedelta(minutes=30),
            )
        )

    dry = run("reconcile", "--dry-run")
    data = json.loads(run("reconcile", "--dry-run", "--json").output)

    assert dry.exit_code == 0, dry.output
    assert "dry run" in dry.output
    assert f"{signalled}  {PROJECT}!7" in dry.output
    assert (data["exact"], data["unmatched"], data["validated"]) == ([signalled], [silent], [])
    assert binding_state(db, signalled) is S.MERGED

    real = run("reconcile")

    assert real.exit_code == 0, real.output
    assert "validated     1" in real.output
    assert binding_state(db, signalled) is S.VALIDATED
    assert binding_state(db, silent) is S.MERGED


# -- hooks ----------------------------------------------------------------------------------------


@pytest.fixture
def gitlab(double: GitLabDouble) -> Iterator[GitLabDouble]:
    """The double answering the bot's calls (through `responses`) for the test's duration."""
    with double.mocked(GITLAB):
        yield double


def test_hooks_install_twice_makes_one_hook(gitlab: GitLabDouble, run: Run) -> None:
    """The first install creates the hook, the second updates it: one hook, as configured."""
    first = run("hooks", "install", PROJECT)
    second = run("hooks", "install", PROJECT)

    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    assert first.output.startswith("created hook #")
    assert second.output.startswith("updated hook #")
    assert f"protected: gitops/* on {PROJECT}: only @gitops-bot may push and merge" in first.output
    assert f"already protected: gitops/* on {PROJECT}: only @gitops-bot" in second.output
    hooks = list(gitlab.project(PROJECT).hooks.values())
    assert len(hooks) == 1
    hook = hooks[0]
    assert hook.url == RECEIVER
    assert hook.token == WEBHOOK_SECRET
    on = {name for name, value in hook.flags.items() if value}
    assert on == {"merge_requests_events", "pipeline_events", "note_events", "deployment_events"}
    assert WEBHOOK_SECRET not in first.output + second.output


def test_hooks_install_to_another_url(gitlab: GitLabDouble, run: Run) -> None:
    """--url points the hook elsewhere (a second receiver); a non-http URL is refused."""
    assert run("hooks", "install", PROJECT, "--url", "https://other.example.com/h").exit_code == 0
    assert [h.url for h in gitlab.project(PROJECT).hooks.values()] == [
        "https://other.example.com/h"
    ]
    refused = run("hooks", "install", PROJECT, "--url", "ftp://x")
    assert refused.exit_code == 1
    assert "http(s) URL" in refused.output


def test_hooks_install_without_the_secret_is_refused(gitlab: GitLabDouble, run: Run) -> None:
    """No GITOPS_WEBHOOK_SECRET: nothing is created (the bot would refuse every delivery)."""
    result = run("hooks", "install", PROJECT, GITOPS_WEBHOOK_SECRET="")
    assert result.exit_code == 1
    assert "GITOPS_WEBHOOK_SECRET" in result.output
    assert gitlab.project(PROJECT).hooks == {}


def test_hooks_install_on_a_project_gitlab_does_not_know(gitlab: GitLabDouble, run: Run) -> None:
    """GitLab's refusal is one line naming the project, exit 1."""
    result = run("hooks", "install", "nobody/nothing")
    assert result.exit_code == 1
    assert "nobody/nothing" in result.output
    assert "404" in result.output


def test_hooks_check_reports_a_disabled_hook_and_exits_1(
    db: Engine, gitlab: GitLabDouble, run: Run
) -> None:
    """A hook GitLab disabled is reported (and kept for the dashboard); the exit status is 1."""
    make_operation(db, S.MERGING)  # names the project: it is managed
    hook = gitlab.add_hook(PROJECT, RECEIVER, token=WEBHOOK_SECRET)
    gitlab.disable_hook(PROJECT, hook.id)

    result = run("hooks", "check")

    assert result.exit_code == 1, result.output
    assert "DISABLED" in result.output
    line = next(x for x in result.output.splitlines() if x.startswith(PROJECT))
    assert line.split()[:5] == [PROJECT, f"#{hook.id}", "disabled", "-", "yes"]
    stored = last_report(db)
    assert stored is not None
    assert [(h.project, h.hook_id) for h in stored.disabled] == [(PROJECT, hook.id)]


def test_hooks_check_all_well_exits_0(db: Engine, gitlab: GitLabDouble, run: Run) -> None:
    """Every hook enabled, gitops/* protected: "no disabled hooks", exit 0; JSON says the same."""
    gitlab.add_hook(PROJECT, RECEIVER, token=WEBHOOK_SECRET)
    gitlab.protect_branch(
        PROJECT, "gitops/*", push=("gitops-bot",), merge=("gitops-bot",), allow_force_push=True
    )

    result = run("hooks", "check", GITOPS_PROJECTS=PROJECT)
    data = json.loads(run("hooks", "check", "--json", GITOPS_PROJECTS=PROJECT).output)

    assert result.exit_code == 0, result.output
    assert "no disabled hooks" in result.output
    assert (data["projects"], data["disabled"], data["missing"]) == ([PROJECT], [], [])
    assert (data["unprotected"], data["fallback"]) == ({}, [])


def test_hooks_check_names_missing_and_unreadable_projects(gitlab: GitLabDouble, run: Run) -> None:
    """A project without our hook is named; one GitLab will not show makes the exit status 2."""
    gitlab.protect_branch(
        PROJECT, "gitops/*", push=("gitops-bot",), merge=("gitops-bot",), allow_force_push=True
    )
    result = run("hooks", "check", "--project", PROJECT, "--project", "ghost/repo")

    assert result.exit_code == 2, result.output
    assert f"missing: {PROJECT} has no hook to the bot" in result.output
    assert "unchecked: ghost/repo" in result.output


def test_hooks_install_protects_the_bots_branches_for_the_author_only(
    gitlab: GitLabDouble, run: Run
) -> None:
    """After install only the author account may push to gitops/*: a Maintainer's push fails."""
    gitlab.add_user("alice", access={PROJECT: 40})

    result = run("hooks", "install", PROJECT)

    assert result.exit_code == 0, result.output
    rule = gitlab.protection(PROJECT, "gitops/*")
    assert rule is not None
    bot = gitlab.user("gitops-bot").id
    assert [e.user_id for e in rule.push] == [bot]
    assert [e.user_id for e in rule.merge] == [bot]
    assert rule.allow_force_push is True
    with pytest.raises(ApiError):
        gitlab.push(PROJECT, "gitops/op-1", {"x": "1\n"}, author="alice", start_branch="main")
    gitlab.push(PROJECT, "gitops/op-1", {"x": "1\n"}, author="gitops-bot", start_branch="main")


def test_hooks_install_fixes_a_wrong_protection(gitlab: GitLabDouble, run: Run) -> None:
    """A gitops/* rule letting Developers push is narrowed to the author, and says what it was."""
    gitlab.protect_branch(PROJECT, "gitops/*", push=(30,), merge=(30,))

    result = run("hooks", "install", PROJECT)

    assert result.exit_code == 0, result.output
    assert f"fixed: gitops/* on {PROJECT}: only @gitops-bot may push and merge" in result.output
    assert "(was: Developers + Maintainers may push; the author account may not push;" in (
        result.output
    )
    rule = gitlab.protection(PROJECT, "gitops/*")
    assert rule is not None
    assert [(e.user_id, e.access_level) for e in rule.push] == [
        (gitlab.user("gitops-bot").id, None)
    ]


def test_hooks_install_on_ce_says_it_falls_back_to_maintainers(
    gitlab: GitLabDouble, run: Run
) -> None:
    """On CE the command protects gitops/* for Maintainers (40) and says it is the fallback."""
    gitlab.edition = "ce"

    result = run("hooks", "install", PROJECT)

    assert result.exit_code == 0, result.output
    assert "Maintainers may push and merge" in result.output
    assert "fallback is Maintainers (access level 40)" in result.output
    rule = gitlab.protection(PROJECT, "gitops/*")
    assert rule is not None
    assert [e.access_level for e in rule.push] == [40]


def test_hooks_install_that_cannot_protect_exits_1(gitlab: GitLabDouble, run: Run) -> None:
    """A GitLab refusal of the protection (here a 403) is one line naming the project, exit 1."""
    gitlab.fail_next(1, 403, methods="POST", path_contains="/protected_branches")

    result = run("hooks", "install", PROJECT)

    assert result.exit_code == 1
    assert result.output.startswith("created hook #")
    assert f"{PROJECT}: cannot protect gitops/*" in result.output
    assert gitlab.protection(PROJECT, "gitops/*") is None


def test_hooks_check_reports_unprotected_bot_branches_and_exits_1(
    gitlab: GitLabDouble, run: Run
) -> None:
    """A project without gitops/* protection is named UNPROTECTED (exit 1); after install, not."""
    gitlab.add_hook(PROJECT, RECEIVER, token=WEBHOOK_SECRET)

    before = run("hooks", "check", GITOPS_PROJECTS=PROJECT)
    run("hooks", "install", PROJECT)
    after = run("hooks", "check", GITOPS_PROJECTS=PROJECT)

    assert before.exit_code == 1, before.output
    assert f"UNPROTECTED: gitops/* on {PROJECT}: not protected" in before.output
    assert after.exit_code == 0, after.output
    assert "UNPROTECTED" not in after.output


def test_install_text_names_what_gitlab_kept_otherwise() -> None:
    """When GitLab's answer still lets others push, the line says NOT PROTECTED and why."""
    verdict = Verdict(False, "", ("Maintainers may push", "the author account may not push"))
    result = ProtectionResult("fixed", ("not protected",), verdict)

    text = ops_hooks.protect_text(PROJECT, result, "gitops-bot")

    assert text.startswith(f"NOT PROTECTED as needed: gitops/* on {PROJECT}: Maintainers may push;")
