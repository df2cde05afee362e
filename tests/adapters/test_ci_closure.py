"""bot/app/ci_closure.py on the GitLab double: every file the CI configuration includes, in
every form that lands in this repository, walked to the end at one commit, or refused."""

from __future__ import annotations

import pytest

from bot.app.ci_closure import ci_closure
from bot.app.ci_walk import MAX_FILES
from bot.core.path_policy import included_by
from bot.gitlab import Account, Project, make_client
from bot.gitlab.ci_includes import INFO_TTL, project_info
from bot.policy.ci_yaml import CiConfigUnresolved
from sim.gitlab import GitLabDouble
from tests.adapters.conftest import PROJECT, URL


@pytest.fixture
def project() -> Project:
    """The project as the author bot sees it (a new account: nothing cached)."""
    return Account(make_client(URL, "author-token", timeout=5.0)).project(PROJECT)


def protects(project: Project, sha: str, path: str) -> str | None:
    """The include that names `path` in the closure at `sha` (None: not protected)."""
    closure = ci_closure(project, sha)
    pattern = included_by(path, closure.patterns)
    return None if pattern is None else closure.origin(pattern)


def test_one_ci_file_costs_one_read_and_the_project_once_a_minute(
    double: GitLabDouble, project: Project
) -> None:
    """A project with one CI file and no include: the file read at the commit; the project's
    settings read on the first walk only."""
    sha = double.push(PROJECT, "main", {".gitlab-ci.yml": "build: {script: [make]}\n"})
    start = len(double.calls)
    first = ci_closure(project, sha)
    second = ci_closure(project, sha)
    calls = [f"{c.method} {c.path}" for c in double.calls[start:]]
    raw = f"GET /projects/{PROJECT}/repository/files/.gitlab-ci.yml/raw"
    assert calls == [f"GET /projects/{PROJECT}", raw, raw]
    assert double.calls[-1].query["ref"] == sha
    assert first.patterns == second.patterns == (".gitlab-ci.yml",)


def test_the_settings_are_read_again_after_the_ttl(double: GitLabDouble, project: Project) -> None:
    """A changed `ci_config_path` is seen once INFO_TTL has passed."""
    now = [1000.0]
    assert project_info(project, now=lambda: now[0]).ci_config_path == ""
    double.set_ci_config_path(PROJECT, "ci/main.yml")
    assert project_info(project, now=lambda: now[0]).ci_config_path == ""
    now[0] += INFO_TTL + 1
    assert project_info(project, now=lambda: now[0]).ci_config_path == "ci/main.yml"


@pytest.mark.parametrize(
    ("ci", "files", "path", "origin"),
    [
        (
            "include: {project: PLATFORM/Config, ref: v1, file: [ci/a.yml, /ci/b.yml]}\n",
            {},
            "ci/b.yml",
            "include:project in .gitlab-ci.yml",
        ),
        (
            "include: [{project: $CI_PROJECT_PATH, file: ci/c.yml}]\n",
            {},
            "ci/c.yml",
            "include:project in .gitlab-ci.yml",
        ),
        (
            "include: [{component: $CI_SERVER_FQDN/platform/config/lint@1.0}]\n",
            {},
            "templates/lint/template.yml",
            "include:component in .gitlab-ci.yml",
        ),
        (
            "child:\n  trigger:\n    include: [{local: ci/child.yml}]\n",
            {},
            "ci/child.yml",
            "trigger:include:local of job child in .gitlab-ci.yml",
        ),
        (
            "include: ci/parts/*.yml\n",
            {"ci/parts/a.yml": "include: ci/deep.yml\n"},
            "ci/deep.yml",
            "include:local in ci/parts/a.yml",
        ),
        (
            "include: {local: 'envs/$ENVIRONMENT.yml'}\n",
            {},
            "envs/sub/prod.yml",
            "include:local in .gitlab-ci.yml",
        ),
        (
            f"include: {{remote: '{URL}/{PROJECT}/-/raw/main/ci/r.yml'}}\n",
            {},
            "ci/r.yml",
            "include:remote in .gitlab-ci.yml",
        ),
        (
            "spec:\n  include: [{local: ci/inputs.yml}]\n---\nbuild: {script: [make]}\n",
            {},
            "ci/inputs.yml",
            "spec:include:local in .gitlab-ci.yml",
        ),
    ],
)
def test_every_include_form_naming_this_repository_is_protected(
    double: GitLabDouble,
    project: Project,
    ci: str,
    files: dict[str, str],
    path: str,
    origin: str,
) -> None:
    """`project:` naming this project (any case, any ref, a variable), `component:`, a child
    pipeline's `trigger:include`, a wildcard (and what the file it matches includes), a `$VAR`
    (across directories), a raw URL of this project, a `spec:` header include."""
    sha = double.push(PROJECT, "main", {".gitlab-ci.yml": ci, **files})
    assert protects(project, sha, path) == origin


def test_what_is_not_in_this_repository_is_neither_protected_nor_read(
    double: GitLabDouble, project: Project
) -> None:
    """Templates, other projects, other hosts, artifacts: nothing of this repository."""
    ci = """
include:
  - template: Auto-DevOps.gitlab-ci.yml
  - project: platform/templates
    file: ci/shared.yml
  - remote: https://example.com/ci/shared.yml
  - component: gitlab.example.com/platform/other/lint@1
child:
  trigger:
    include: [{artifact: generated.yml, job: make}]
"""
    sha = double.push(PROJECT, "main", {".gitlab-ci.yml": ci})
    start = len(double.calls)
    closure = ci_closure(project, sha)
    assert closure.patterns == (".gitlab-ci.yml",)
    read = [c.path for c in double.calls[start:] if "/repository/" in c.path]
    assert read == [f"/projects/{PROJECT}/repository/files/.gitlab-ci.yml/raw"]


def test_a_nesting_twelve_deep_is_followed_to_the_end(
    double: GitLabDouble, project: Project
) -> None:
    """Twelve nested includes (past the ten reads the walk stopped at before) all protected."""
    files = {f"ci/{n}.yml": f"include: ci/{n + 1}.yml\n" for n in range(12)}
    sha = double.push(PROJECT, "main", {".gitlab-ci.yml": "include: ci/0.yml\n", **files})
    assert protects(project, sha, "ci/12.yml") == "include:local in ci/11.yml"


def test_a_cycle_is_read_once(double: GitLabDouble, project: Project) -> None:
    """a.yml includes b.yml includes a.yml: each read once, both protected."""
    sha = double.push(
        PROJECT,
        "main",
        {
            ".gitlab-ci.yml": "include: a.yml\n",
            "a.yml": "include: b.yml\n",
            "b.yml": "include: a.yml\n",
        },
    )
    start = len(double.calls)
    assert ci_closure(project, sha).patterns == (".gitlab-ci.yml", "a.yml", "b.yml")
    assert len([c for c in double.calls[start:] if c.path.endswith("/raw")]) == 3


def test_more_files_than_gitlab_allows_is_refused(double: GitLabDouble, project: Project) -> None:
    """MAX_FILES included files are walked; one more refuses the change (fail closed)."""
    files = {f"ci/{n}.yml": "x: 1\n" for n in range(MAX_FILES + 1)}
    limit = "include:\n" + "".join(f"  - ci/{n}.yml\n" for n in range(MAX_FILES))
    sha = double.push(PROJECT, "main", {".gitlab-ci.yml": limit, **files})
    assert len(ci_closure(project, sha).patterns) == MAX_FILES + 1
    over = double.push(PROJECT, "main", {".gitlab-ci.yml": limit + f"  - ci/{MAX_FILES}.yml\n"})
    with pytest.raises(CiConfigUnresolved, match=f"more than {MAX_FILES} included files"):
        ci_closure(project, over)


def test_an_included_file_the_bot_cannot_parse_refuses(
    double: GitLabDouble, project: Project
) -> None:
    """Broken YAML in an included file: refused, naming the file and the line."""
    sha = double.push(
        PROJECT, "main", {".gitlab-ci.yml": "include: ci/a.yml\n", "ci/a.yml": "a: [b\nc: 1\n"}
    )
    with pytest.raises(CiConfigUnresolved, match=r"ci/a\.yml:\d+:\d+: cannot be read"):
        ci_closure(project, sha)


def test_the_walk_reads_the_commit_it_is_given(double: GitLabDouble, project: Project) -> None:
    """An include added to the branch later is not in the closure of the earlier commit, and is
    in the closure of the new head."""
    before = double.push(PROJECT, "main", {".gitlab-ci.yml": "build: {script: [make]}\n"})
    after = double.push(PROJECT, "main", {".gitlab-ci.yml": "include: config/prod.yaml\n"})
    assert protects(project, before, "config/prod.yaml") is None
    assert protects(project, after, "config/prod.yaml") == "include:local in .gitlab-ci.yml"


def test_a_wildcard_sees_files_past_the_first_page_of_the_tree(
    double: GitLabDouble, project: Project
) -> None:
    """The tree is listed page by page (100 entries each): a match on the third page is walked."""
    files = {f"ci/parts/{n:03}.txt": "x\n" for n in range(249)}
    files["ci/parts/249.yml"] = "include: ci/last.yml\n"
    sha = double.push(PROJECT, "main", {".gitlab-ci.yml": "include: ci/parts/*.yml\n", **files})
    assert protects(project, sha, "ci/last.yml") == "include:local in ci/parts/249.yml"
    pages = double.calls_matching("GET", "/repository/tree")
    assert [c.query.get("page", "1") for c in pages] == ["1", "2", "3"]
    assert {c.query["path"] for c in pages} == {"ci/parts"}


def test_a_custom_ci_config_path_and_its_includes_are_protected(
    double: GitLabDouble, project: Project
) -> None:
    """`ci_config_path: ci/main.yml`: that file and what it includes are protected."""
    double.set_ci_config_path(PROJECT, "ci/main.yml")
    sha = double.push(PROJECT, "main", {"ci/main.yml": "include: ci/jobs.yml\n"})
    assert protects(project, sha, "ci/main.yml") == (
        "the project's CI/CD configuration file setting"
    )
    assert protects(project, sha, "ci/jobs.yml") == "include:local in ci/main.yml"


def test_a_ci_config_path_in_another_project_is_walked_for_this_one(
    double: GitLabDouble, project: Project
) -> None:
    """`ci.yml@platform/ci:stable`: read with the bot's token; what it includes of this
    project is protected; its own local includes are that project's files."""
    double.add_project("platform/ci", files={})
    double.push(
        "platform/ci",
        "stable",
        {
            "ci.yml": "include: [shared.yml, {project: platform/config, file: deploy/ci.yml}]\n",
            "shared.yml": "include: {project: platform/config, file: deploy/more.yml}\n",
        },
        start_branch="main",
    )
    double.set_ci_config_path(PROJECT, "ci.yml@platform/ci:stable")
    sha = double.push(PROJECT, "main", {"deploy/ci.yml": "x: 1\n"})
    closure = ci_closure(project, sha)
    assert closure.patterns == ("deploy/ci.yml", "deploy/more.yml")
    assert closure.origin("deploy/more.yml") == ("include:project in shared.yml of platform/ci")
    assert not closure.reusable


def test_a_ci_config_path_in_a_project_the_bot_cannot_read_refuses(
    double: GitLabDouble, project: Project
) -> None:
    """A private project the bot is no member of (GitLab answers 404): fail closed."""
    double.add_project("secret/ci", files={"ci.yml": "x: 1\n"}, visibility="private")
    double.set_ci_config_path(PROJECT, "ci.yml@secret/ci")
    sha = double.branch_head(PROJECT, "main")
    assert sha is not None
    with pytest.raises(CiConfigUnresolved, match="names secret/ci, which the bot cannot read"):
        ci_closure(project, sha)


def test_a_remote_ci_config_path_on_another_host_refuses(
    double: GitLabDouble, project: Project
) -> None:
    """A URL the bot does not read: fail closed, never fetched."""
    double.set_ci_config_path(PROJECT, "https://ci.example.net/config.yml")
    sha = double.branch_head(PROJECT, "main")
    assert sha is not None
    with pytest.raises(CiConfigUnresolved, match="not a file of this GitLab"):
        ci_closure(project, sha)


def test_many_large_files_stop_at_the_walk_budget(double: GitLabDouble, project: Project) -> None:
    """Ten included files of 90,000 YAML nodes each (each within the per-file budget): the walk
    stops at MAX_TOTAL_NODES, after the third file, instead of parsing all ten."""
    big = "l:\n" + "- 1\n" * 90_000
    files = {f"ci/{n}.yml": big for n in range(10)}
    ci = "include:\n" + "".join(f"  - ci/{n}.yml\n" for n in range(10))
    sha = double.push(PROJECT, "main", {".gitlab-ci.yml": ci, **files})
    start = len(double.calls)
    with pytest.raises(CiConfigUnresolved, match="YAML nodes"):
        ci_closure(project, sha)
    assert len([c for c in double.calls[start:] if c.path.endswith("/raw")]) == 1 + 3
