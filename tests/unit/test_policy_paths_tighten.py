"""A repository's policy tightens the operator's environment, never loosens it (pure parts):
`paths.allowed` narrows GITOPS_ALLOWED_PATHS and names no built-in protected path, only the
operator's entries unlock one, `paths.protected` only adds the need for a Maintainer, command
levels only go up, and a Maintainer's authority covers the head that Maintainer applied at."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.app.policy import command_rules, limits_from, loosening, parse_checked
from bot.app.steps.paths import MOVED, UNBOUND, maintainer_authority
from bot.config import Settings
from bot.core.commands import DEVELOPER, GUEST, MAINTAINER, Verb
from bot.core.path_policy import NOTHING_ALLOWED, narrowed, refused_paths, unlocks
from bot.core.paths import UnsafePath, normalise_path
from bot.core.states import BindingState, Flow, Step
from bot.policy import POLICY_PATH, PolicyError, parse_policy
from bot.store.flags import DEFAULTS
from bot.store.operations import OperationRow

#: The server's values with the default settings and flags.
LIMITS = limits_from(Settings(), DEFAULTS)

#: A person's MR applied by a Maintainer at head "a"*40 (MR first, no files of its own).
APPLIED = OperationRow(
    id="op-1",
    state=BindingState.MR_CREATED,
    owner=True,
    flow=Flow.MR_FIRST,
    step=Step.CREATE_PIPELINE_PASSED,
    version=3,
    kind="change",
    project="group/project",
    project_id=1,
    target_branch="main",
    title="t",
    description="d",
    files=[],
    requested_by="maria",
    mr_iid=7,
    mr_url=None,
    mr_opened_by_bot=False,
    branch="feature",
    head_sha="a" * 40,
    merge_commit_sha=None,
    approval_id=None,
    change_identity=None,
    verified_sha=None,
    approved=False,
    attempts=0,
    deadline_at=None,
    progress={},
    maintainer_request=True,
    maintainer_sha="a" * 40,
)


def under(path: str, allowed: tuple[str, ...]) -> bool:
    """Whether bot/core/paths.py puts `path` under `allowed` (empty: any safe path)."""
    try:
        normalise_path(path, allowed)
    except UnsafePath:
        return False
    return True


# -- narrowing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "repository", "expected"),
    [
        ((), None, ()),
        (("config/",), None, ("config/",)),
        (("config/",), [], ("config/",)),  # an empty list adds no restriction of its own
        ((), ["apps/"], ("apps/",)),
        (("config/",), ["config/prod/", "apps/"], ("config/prod/",)),
        (("config/prod/",), ["config/"], ("config/prod/",)),
        (("config",), ["config/"], ("config/",)),
        (("config/",), ["apps/"], (NOTHING_ALLOWED,)),
        ((), [".gitlab-ci.yml"], (NOTHING_ALLOWED,)),  # a recorded loosening entry is dropped
        (("config/", ".gitlab-ci.yml"), ["config/"], ("config/",)),
        (("config/a.yaml", "config/b/"), ["/"], ("config/a.yaml", "config/b/")),
    ],
)
def test_narrowed(
    operator: tuple[str, ...], repository: list[str] | None, expected: tuple[str, ...]
) -> None:
    """The operator's paths narrowed by the repository's, never widened."""
    assert narrowed(operator, repository) == expected


SEGMENT = st.sampled_from(["config", "prod", "apps", "a.yaml", "x", ".gitlab", "ci"])
PREFIX = st.builds(
    lambda parts, slash: "/".join(parts) + ("/" if slash else ""),
    st.lists(SEGMENT, min_size=1, max_size=3),
    st.booleans(),
)
PATH = st.builds("/".join, st.lists(SEGMENT, min_size=1, max_size=4))


@given(
    operator=st.lists(PREFIX, max_size=3),
    repository=st.one_of(st.none(), st.lists(PREFIX, max_size=3)),
    path=PATH,
)
def test_a_path_is_under_the_narrowed_paths_exactly_when_both_allow_it(
    operator: list[str], repository: list[str] | None, path: str
) -> None:
    """For any lists and path: allowed after narrowing <=> allowed by the operator and by the
    repository's entries that name no protected path (none or empty: no restriction)."""
    theirs = tuple(e for e in repository or () if unlocks(e) is None)
    both = under(path, tuple(operator)) and (
        not repository or (bool(theirs) and under(path, theirs))
    )
    assert under(path, narrowed(operator, repository)) is both


@pytest.mark.parametrize(
    ("entry", "zone"),
    [
        (".gitlab-ci.yml", ".gitlab-ci.yml"),
        ("./.GITLAB-CI.yml", ".gitlab-ci.yml"),
        (".gitlab", ".gitlab/"),
        (".gitlab/", ".gitlab/"),
        (".gitlab/agents/prod/", ".gitlab/"),
        ("CODEOWNERS", "CODEOWNERS"),
        ("docs/CODEOWNERS", "docs/CODEOWNERS"),
        (".gitattributes", ".gitattributes"),
        (".gitops/bot.yml", ".gitops/"),
        ("docs/", None),
        (".gitops/", ".gitops/"),
        ("config/.gitlab-ci.yml", None),
        ("/", None),
    ],
)
def test_unlocks_names_the_protected_path_an_entry_would_allow(
    entry: str, zone: str | None
) -> None:
    """An entry that names a protected file, or a protected directory or inside it."""
    assert unlocks(entry) == zone


# -- refusing -------------------------------------------------------------------------------------


def test_only_the_operators_entries_unlock_a_protected_path_or_a_ci_include() -> None:
    """With `unlocking` (GITOPS_ALLOWED_PATHS) empty, no allowed entry unlocks; with the
    operator naming them, they are allowed when also under the allowed paths."""
    paths = [".gitlab-ci.yml", "ci/build.yml"]
    allowed = ("config/", ".gitlab-ci.yml", "ci/build.yml")
    includes = ["ci/build.yml"]
    locked = refused_paths(paths, allowed=allowed, ci_includes=includes, unlocking=())
    assert [r.kind for r in locked] == ["protected"] * 2
    unlocking = (".gitlab-ci.yml", "ci/build.yml")
    assert refused_paths(paths, allowed=allowed, ci_includes=includes, unlocking=unlocking) == []
    narrowed_away = refused_paths(paths, allowed=("config/",), unlocking=allowed)
    assert [r.kind for r in narrowed_away] == ["outside", "outside"]


def test_the_files_protected_paths_only_add_the_need_for_a_maintainer() -> None:
    """A path `paths.protected` lists: refused without a Maintainer; with one, still held to
    the allowed and built-in protected paths."""
    protected = ("secrets/", ".gitlab-ci.yml")
    paths = ["secrets/db.yaml", ".gitlab-ci.yml", "config/a.yaml"]
    refusals = refused_paths(paths, allowed=("config/",), protected=protected, maintainer=True)
    assert [(r.path, r.kind) for r in refusals] == [
        ("secrets/db.yaml", "outside"),
        (".gitlab-ci.yml", "protected"),
    ]
    inside = refused_paths(["config/prod/a.yaml"], allowed=("config/",), protected=["config/prod/"])
    assert "changing it needs Maintainer" in inside[0].reason
    assert (
        refused_paths(
            ["config/prod/a.yaml"],
            allowed=("config/",),
            protected=["config/prod/"],
            maintainer=True,
        )
        == []
    )


def test_the_policy_file_is_a_maintainers_and_a_lost_authority_says_why() -> None:
    """A Maintainer may change .gitops/bot.yml whatever the allowed paths say; a request whose
    Maintainer's authority does not cover it is refused with that reason."""
    assert refused_paths([".gitops/bot.yml"], allowed=("config/",), maintainer=True) == []
    [lost] = refused_paths([".gitops/bot.yml"], allowed=("config/",), maintainer_lost=MOVED)
    assert lost.reason == f"is a protected path (.gitops/); {MOVED}"


# -- the file, command levels, the Maintainer's head ----------------------------------------------


def test_parse_checked_refuses_what_parse_policy_accepts() -> None:
    """The schema allows any path entry; parse_checked refuses one naming a protected path,
    at its position; a clean file parses as parse_policy reads it."""
    text = "paths:\n  allowed:\n    - config/\n    - .gitlab/ci/\n"
    assert parse_policy(text).paths.allowed == ["config/", ".gitlab/ci/"]
    with pytest.raises(PolicyError) as caught:
        parse_checked(text, POLICY_PATH, LIMITS)
    assert (caught.value.line, caught.value.column) == (4, 7)
    assert (
        loosening(b"paths: {allowed: [config/]}\n", parse_policy("{}"), POLICY_PATH, LIMITS) == []
    )
    assert parse_checked("paths: {allowed: [config/]}\n", POLICY_PATH, LIMITS).paths.allowed == [
        "config/"
    ]


def test_command_levels_only_go_up() -> None:
    """The file raises a verb's level; a lower one leaves the flag's (or the default)."""
    policy = parse_policy("commands: {min_access: {apply: guest, cancel: owner, help: developer}}")
    rules = command_rules(policy, {"status": GUEST}, [])
    assert rules.min_access[Verb.APPLY] == DEVELOPER  # the default, not the file's guest
    assert rules.min_access[Verb.CANCEL] == 50
    assert rules.min_access[Verb.HELP] == DEVELOPER
    assert rules.min_access[Verb.STATUS] == GUEST  # the flag's own lowering stands
    assert command_rules(policy, {"apply": MAINTAINER}, []).min_access[Verb.APPLY] == MAINTAINER


def test_a_maintainers_authority_covers_the_head_applied_at() -> None:
    """The files the bot writes are covered; a person's MR only at the recorded head."""
    base = APPLIED
    assert maintainer_authority(base, "a" * 40).maintainer
    assert maintainer_authority(base, "b" * 40).lost == MOVED
    assert maintainer_authority(replace(base, maintainer_sha=None), "a" * 40).lost == UNBOUND
    written = replace(base, files=[{"path": ".gitops/bot.yml", "content": "{}\n"}])
    assert maintainer_authority(written, "b" * 40).maintainer
    assert maintainer_authority(replace(base, maintainer_request=False), "a" * 40).lost is None
