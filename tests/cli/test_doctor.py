"""`gitops-bot doctor` against the GitLab double (through `responses`) and the fake approval
system: an all-green setup exits 0; each miss, injected alone, exits 1 naming that check and its
fix, and nothing else is red."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import responses
from sqlalchemy.engine import Engine

from sim.approval import FakeApprovalSystem
from sim.gitlab import GitLabDouble
from tests.builders import make_operation
from tests.cli import AUTHOR_TOKEN, GITLAB, PUBLIC, WEBHOOK_SECRET, Run

PROJECT = "platform/config"
RECEIVER = f"{PUBLIC}/webhooks/gitlab"
APPROVER_TOKEN = "approver-token-cli-789"


@dataclass
class World:
    """The double, the approval system and the mock, for a case to break one thing in."""

    gitlab: GitLabDouble
    approvals: FakeApprovalSystem
    mock: responses.RequestsMock
    env: dict[str, str | None]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A setup where every check passes: two users with `api` tokens, the author Maintainer and
    the approver Developer, the hook installed, gitops/* protected for the author, the default
    branch protected as GitLab does it (Maintainers push and merge), the approval system up and
    the public URL answering /healthz."""
    gitlab = GitLabDouble(GITLAB)
    gitlab.add_project(PROJECT)
    gitlab.add_user("gitops-bot", token=AUTHOR_TOKEN, access={PROJECT: 40})
    gitlab.add_user("gitops-approver", token=APPROVER_TOKEN, access={PROJECT: 30})
    gitlab.protect_branch(PROJECT, "main")
    approvals = FakeApprovalSystem("approval-secret", decide_after=None)
    approvals.start()
    try:
        with gitlab.mocked(GITLAB) as mock:
            mock.add_passthru(approvals.url)
            mock.add(responses.GET, f"{PUBLIC}/healthz", json={"status": "ok"})
            env: dict[str, str | None] = {
                "GITOPS_APPROVER_TOKENS": APPROVER_TOKEN,
                "GITOPS_APPROVAL_URL": approvals.url,
                "GITOPS_PROJECTS": PROJECT,
            }
            yield World(gitlab, approvals, mock, env)
    finally:
        approvals.stop()


def _install(world: World, events: tuple[str, ...] | None = None) -> None:
    kwargs: dict[str, Any] = {} if events is None else {"events": events}
    world.gitlab.add_hook(PROJECT, RECEIVER, token=WEBHOOK_SECRET, **kwargs)


def _protect(world: World) -> None:
    world.gitlab.protect_branch(
        PROJECT, "gitops/*", push=("gitops-bot",), merge=("gitops-bot",), allow_force_push=True
    )


def _green(world: World) -> None:
    _install(world)
    _protect(world)
    world.env["GITOPS_CALLBACK_HOSTS"] = "hooks.example.com"
    world.env["GITOPS_CALLBACK_SECRET"] = "callback-secret"


def doctor(run: Run, world: World, *args: str) -> tuple[int, str, dict[str, Any]]:
    """Runs `doctor` as text and as JSON: exit status, the text, the JSON."""
    text = run("doctor", *args, **world.env)
    data = run("doctor", "--json", *args, **world.env)
    assert data.exit_code == text.exit_code, data.output
    return text.exit_code, text.output, json.loads(data.output)


def _statuses(data: dict[str, Any]) -> dict[str, str]:
    return {check["name"]: check["status"] for check in data["checks"]}


def test_an_all_green_setup_exits_0(world: World, run: Run) -> None:
    """Every check ok: exit 0, "all well", and the JSON says ok."""
    _green(world)

    code, text, data = doctor(run, world)

    assert code == 0, text
    assert data["ok"] is True
    assert set(_statuses(data).values()) == {"ok"}, text
    assert set(_statuses(data)) == {
        "database",
        "queue",
        "gitlab",
        "token author",
        "token approver-1",
        "distinct users",
        f"access {PROJECT}",
        f"merge {PROJECT}",
        f"approve {PROJECT}",
        f"hook {PROJECT}",
        f"protection {PROJECT}",
        f"delete merged branches {PROJECT}",
        "webhook deliveries",
        "approval system",
        "public URL",
        "completion callbacks",
    }
    assert "in-process queue is used" in text
    assert "@gitops-bot" in text
    assert "@gitops-approver" in text
    assert "main: Maintainers may merge (rule main)" in text
    assert text.rstrip().endswith("all well")
    # doctor only reads: nothing was written to GitLab
    assert world.gitlab.count("POST") + world.gitlab.count("PUT") == 0


def _unknown_token(world: World, tmp_path: Path) -> None:
    world.env["GITOPS_APPROVER_TOKENS"] = "no-such-token"


def _same_user(world: World, tmp_path: Path) -> None:
    world.env["GITOPS_APPROVER_TOKENS"] = AUTHOR_TOKEN


def _no_access(world: World, tmp_path: Path) -> None:
    world.gitlab.add_user("outsider", token="outsider-token")
    world.env["GITOPS_APPROVER_TOKENS"] = "outsider-token"


def _no_approver_access(world: World, tmp_path: Path) -> None:
    world.gitlab.add_member(PROJECT, "gitops-approver", 20)


def _author_scope(world: World, tmp_path: Path) -> None:
    world.gitlab.user("gitops-bot").scopes = ("read_api", "read_repository")


def _no_approvers(world: World, tmp_path: Path) -> None:
    world.env["GITOPS_APPROVER_TOKENS"] = None


def _database_unreachable(world: World, tmp_path: Path) -> None:
    # nothing listens on port 1: the connection is refused at once
    world.env["GITOPS_DATABASE_URL"] = "postgresql+psycopg://gitops@127.0.0.1:1/gitops"


def _main_merged_by_no_one(world: World, tmp_path: Path) -> None:
    world.gitlab.protect_branch(PROJECT, "main", push=(0,), merge=(0,))


def _main_for_another_user(world: World, tmp_path: Path) -> None:
    world.gitlab.protect_branch(PROJECT, "main", push=(0,), merge=("gitops-approver",))


def _narrow_scope(world: World, tmp_path: Path) -> None:
    world.gitlab.add_user(
        "reader", token="reader-token", scopes=("read_api",), access={PROJECT: 30}
    )
    world.env["GITOPS_APPROVER_TOKENS"] = f"{APPROVER_TOKEN},reader-token"


def _approval_down(world: World, tmp_path: Path) -> None:
    world.approvals.stop()


def _not_migrated(world: World, tmp_path: Path) -> None:
    world.env["GITOPS_DATABASE_URL"] = f"sqlite:///{tmp_path / 'empty.sqlite3'}"


def _redis_down(world: World, tmp_path: Path) -> None:
    world.env["GITOPS_REDIS_URL"] = "redis://127.0.0.1:1/0"


def _callbacks_without_secret(world: World, tmp_path: Path) -> None:
    world.env["GITOPS_CALLBACK_SECRET"] = ""


def _callbacks_without_hosts(world: World, tmp_path: Path) -> None:
    world.env["GITOPS_CALLBACK_HOSTS"] = ""


def _public_url_misrouted(world: World, tmp_path: Path) -> None:
    world.mock.replace(responses.GET, f"{PUBLIC}/healthz", status=502)


Breaks = Callable[[World, Path], None]

#: (what is broken, how, the check that misses, a word of its fix); the hook and protection
#: cases set up the rest themselves
CASES: list[tuple[str, Breaks, str, str]] = [
    ("unknown token", _unknown_token, "token approver-1", "GITOPS_APPROVER_TOKENS (entry 1)"),
    ("same user", _same_user, "distinct users", "its own GitLab user"),
    ("no project access", _no_access, f"approve {PROJECT}", "make @outsider Developer"),
    ("approver only Reporter", _no_approver_access, f"approve {PROJECT}", "@gitops-approver"),
    ("token scope", _narrow_scope, "token approver-2", "scope `api`"),
    ("author token scope", _author_scope, "token author", "GITOPS_GITLAB_TOKEN"),
    ("no approver tokens", _no_approvers, "token approvers", "set GITOPS_APPROVER_TOKENS"),
    ("database unreachable", _database_unreachable, "database", "GITOPS_DATABASE_URL"),
    ("main merged by no one", _main_merged_by_no_one, f"merge {PROJECT}", '"Allowed to merge"'),
    ("main for another user", _main_for_another_user, f"merge {PROJECT}", "merge into main"),
    ("approval system down", _approval_down, "approval system", "GITOPS_APPROVAL_URL"),
    ("database not migrated", _not_migrated, "database", "gitops-bot db upgrade"),
    ("redis down", _redis_down, "queue", "GITOPS_REDIS_URL"),
    ("public URL misrouted", _public_url_misrouted, "public URL", "web process"),
    (
        "callbacks without a secret",
        _callbacks_without_secret,
        "completion callbacks",
        "GITOPS_CALLBACK_SECRET",
    ),
    (
        "callbacks to no host",
        _callbacks_without_hosts,
        "completion callbacks",
        "GITOPS_CALLBACK_HOSTS",
    ),
]


@pytest.mark.parametrize(
    ("breaks", "name", "fix"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_each_miss_alone_exits_1_naming_its_check_and_fix(
    world: World, run: Run, tmp_path: Path, breaks: Breaks, name: str, fix: str
) -> None:
    """One thing broken: exit 1, that check (and only it) MISS, its fix printed."""
    _green(world)
    breaks(world, tmp_path)

    code, text, data = doctor(run, world)

    _only_miss(code, text, data, name, fix)


def _only_miss(code: int, text: str, data: dict[str, Any], name: str, fix: str) -> None:
    assert code == 1, text
    assert data["ok"] is False
    assert [n for n, status in _statuses(data).items() if status == "miss"] == [name], text
    line = next(x for x in text.splitlines() if x.startswith("MISS"))
    assert name in line
    fixes = [x.strip() for x in text.splitlines() if x.strip().startswith("fix: ")]
    assert len(fixes) == 1, text
    assert fix in fixes[0], text
    assert text.rstrip().endswith("1 miss(es)")


@pytest.mark.parametrize(
    ("setup", "fix"),
    [
        pytest.param(lambda w: _protect(w), f"gitops-bot hooks install {PROJECT}", id="missing"),
        pytest.param(
            lambda w: (
                _protect(w),
                w.gitlab.disable_hook(
                    PROJECT, w.gitlab.add_hook(PROJECT, RECEIVER, token=WEBHOOK_SECRET).id
                ),
            ),
            "send a test event",
            id="disabled",
        ),
        pytest.param(
            lambda w: (_protect(w), _install(w, ("merge_requests_events", "note_events"))),
            "(sets the events)",
            id="wrong-events",
        ),
    ],
)
def test_a_hook_missing_disabled_or_with_wrong_events_is_a_miss(
    world: World, run: Run, setup: Callable[[World], object], fix: str
) -> None:
    """The project's hook to the bot: absent, disabled by GitLab, or without pipeline and
    deployment events."""
    setup(world)

    code, text, data = doctor(run, world)

    _only_miss(code, text, data, f"hook {PROJECT}", fix)


def test_unprotected_bot_branches_are_a_miss(world: World, run: Run) -> None:
    """gitops/* not protected: the protection check misses, fixed by `hooks install`."""
    _install(world)

    code, text, data = doctor(run, world)

    _only_miss(code, text, data, f"protection {PROJECT}", f"gitops-bot hooks install {PROJECT}")
    assert "not protected" in text


def test_an_unknown_author_token_skips_what_it_would_read(world: World, run: Run) -> None:
    """The author's token refused: that check misses; the hook and protection checks, which read
    through it, are skipped rather than missed."""
    _green(world)
    world.env["GITOPS_GITLAB_TOKEN"] = "no-such-token"

    code, text, data = doctor(run, world)

    statuses = _statuses(data)
    assert code == 1, text
    assert [n for n, s in statuses.items() if s == "miss"] == ["token author"]
    assert statuses[f"hook {PROJECT}"] == statuses[f"protection {PROJECT}"] == "skipped"
    assert statuses["gitlab"] == "ok"


def test_an_unreachable_public_url_is_skipped_not_missed(world: World, run: Run) -> None:
    """No answer from the public URL here (split DNS, no hairpin) cannot be judged: skipped."""
    _green(world)
    world.mock.replace(
        responses.GET, f"{PUBLIC}/healthz", body=requests.ConnectionError("no route from here")
    )

    code, text, data = doctor(run, world)

    assert code == 0, text
    assert _statuses(data)["public URL"] == "skipped"
    assert "skipped  public URL" in text


def test_an_unreachable_gitlab_is_one_miss(world: World, run: Run) -> None:
    """GitLab does not answer: that check misses; the token and project checks, which need it,
    are skipped."""
    _green(world)
    world.env["GITOPS_GITLAB_URL"] = "https://gitlab.unreachable.example.com"

    code, text, data = doctor(run, world)

    _only_miss(code, text, data, "gitlab", "GITOPS_GITLAB_URL")
    statuses = _statuses(data)
    assert statuses["token author"] == statuses["token approver-1"] == "skipped"
    assert statuses[f"hook {PROJECT}"] == "skipped"


def test_callbacks_off_is_no_miss(world: World, run: Run) -> None:
    """Neither GITOPS_CALLBACK_HOSTS nor its secret: callbacks are off, which is a choice, not a
    miss (the line says a callback_url is refused); the rest green, exit 0."""
    _green(world)
    world.env["GITOPS_CALLBACK_HOSTS"] = ""
    world.env["GITOPS_CALLBACK_SECRET"] = ""

    code, text, data = doctor(run, world)

    assert code == 0, text
    assert _statuses(data)["completion callbacks"] == "skipped"
    assert "a callback_url is refused" in text


def test_a_requested_branch_under_a_wildcard_rule_is_checked(
    world: World, run: Run, db: Engine
) -> None:
    """The branches checked are the default branch and those requests name: a change asked for
    `release/2026` meets `release/*`, where no one may merge, and that branch is named."""
    _green(world)
    make_operation(db, target_branch="release/2026")
    world.gitlab.protect_branch(PROJECT, "release/*", push=(0,), merge=(0,))

    code, text, data = doctor(run, world)

    _only_miss(code, text, data, f"merge {PROJECT}", "merge into release/2026 on")
    line = next(x for x in text.splitlines() if x.startswith("MISS"))
    assert "may not merge into release/2026:" in line
    assert "main: Maintainers may merge (rule main)" in line


def test_the_author_s_own_entry_lets_it_merge(world: World, run: Run) -> None:
    """Premium: `main` merged only by the author account's user entry is no miss."""
    _green(world)
    world.gitlab.protect_branch(PROJECT, "main", push=(0,), merge=("gitops-bot",))

    code, text, data = doctor(run, world)

    assert code == 0, text
    assert _statuses(data)[f"merge {PROJECT}"] == "ok"
    assert f"main: user #{world.gitlab.user('gitops-bot').id} may merge (rule main)" in text
