"""Reading a CI file's includes (bot/policy/ci_yaml.py) and what they name (bot/core/ci_refs.py):
every form GitLab knows, under a budget; what the bot cannot read or resolve is refused."""

from __future__ import annotations

import pytest

from bot.core.ci_refs import (
    RawTarget,
    as_pattern,
    component_name,
    config_setting,
    literal_dir,
    names,
    raw_target,
)
from bot.policy.ci_yaml import CiConfigUnresolved, Include, parse_includes

EVERY_FORM = """
spec:
  inputs: {stage: {default: test}}
  include: [{local: ci/inputs.yml}]
---
.defaults: &defaults {image: ruby}
include:
  - '/ci/build.yml'
  - local: ci/deploy/*.yml
    rules: [{if: $NEVER == "true", when: never}]
  - remote: https://example.com/ci.yml
  - project: group/templates
    ref: v1
    file: [/x.yml, y.yml]
  - template: Auto-DevOps.gitlab-ci.yml
  - component: gitlab.example.com/group/app/lint@1.0
    inputs: {stage: build}
  - local: 'envs/$ENVIRONMENT.yml'
job:
  <<: *defaults
  script: !reference [.setup, script]
child:
  trigger:
    include:
      - child.yml
      - artifact: generated.yml
        job: make
"""


def test_every_include_form_is_read_in_every_document() -> None:
    """Strings, lists, `local:`, `project:` with a list of files, `remote:`, `template:`,
    `component:`, a `spec:` header's includes, a child pipeline's; `rules:`, `inputs:`, merge
    keys and GitLab's `!reference` tag change nothing; an artifact is not a file."""
    found = parse_includes(EVERY_FORM, ".gitlab-ci.yml").includes
    assert [(i.kind, i.location, i.project, i.via, i.job) for i in found] == [
        ("local", "ci/inputs.yml", "", "spec:include", ""),
        ("local", "/ci/build.yml", "", "include", ""),
        ("local", "ci/deploy/*.yml", "", "include", ""),
        ("remote", "https://example.com/ci.yml", "", "include", ""),
        ("project", "/x.yml", "group/templates", "include", ""),
        ("project", "y.yml", "group/templates", "include", ""),
        ("template", "Auto-DevOps.gitlab-ci.yml", "", "include", ""),
        ("component", "gitlab.example.com/group/app/lint@1.0", "", "include", ""),
        ("local", "envs/$ENVIRONMENT.yml", "", "include", ""),
        ("local", "child.yml", "", "trigger:include", "child"),
    ]
    assert parse_includes("include: shared.yml\n", "a.yml").includes == (
        Include("local", "shared.yml"),
    )


def test_the_reason_names_the_include_and_the_file() -> None:
    """A trigger include is named with its job, kept inert."""
    include = Include("local", "x.yml", via="trigger:include", job="deploy\u202e @all")
    assert include.said("ci/a.yml") == (
        "trigger:include:local of job deploy[U+202E] \uff20all in ci/a.yml"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not: [valid", r"ci/a\.yml:\d+:\d+: cannot be read"),
        ("include: [{file: x.yml}]\n", r"an entry of a form the bot does not know \(file\)"),
        ("include: [!reference [.a, b]]\n", r"an entry the bot cannot resolve \(!reference\)"),
        ("include: !reference [.a, b]\n", r"include in ci/a\.yml: an entry the bot cannot"),
        ("include: [{local: 42}]\n", r"`local:` is not a string"),
        ("include: [{local: '$[[ inputs.file ]]'}]\n", r"uses CI/CD inputs"),
        ("include: [{project: '', file: x.yml}]\n", r"names no project"),
        ("include: !!python/object:os.system x\n", r"cannot be read"),
        ("a: " + "[" * 101 + "]" * 101 + "\n", r"nested deeper than 100"),
    ],
)
def test_what_the_bot_cannot_resolve_is_refused(text: str, reason: str) -> None:
    """Broken YAML, an unknown form, a `!reference` where an include goes, a non-string path,
    CI/CD inputs in a path, an unnamed project, a Python tag, nesting past GitLab's 100: each
    refused naming the file (GitLab might run what the bot could not see)."""
    with pytest.raises(CiConfigUnresolved, match=reason):
        parse_includes(text, "ci/a.yml")


def test_values_gitlab_reads_do_not_refuse() -> None:
    """A 5,000-digit integer and an impossible date (Python cannot read them, GitLab can) stay
    text: the file is read."""
    text = f"job:\n  big: {'9' * 5000}\n  when: 2023-02-30\ninclude: a.yml\n"
    assert [i.location for i in parse_includes(text, "x.yml").includes] == ["a.yml"]


def test_a_node_bomb_stops_at_the_budget() -> None:
    """Anchors aliased in a ladder (2**39 values if expanded) are read as shared values, and
    200,000 list items stop at the node budget, at the item that exceeds it: the rest of the
    file is never parsed."""
    ladder = "a0: &a0 [x]\n" + "".join(
        f"a{n}: &a{n} [*a{n - 1}, *a{n - 1}]\n" for n in range(1, 40)
    )
    assert parse_includes(ladder, "x.yml").includes == ()
    with pytest.raises(
        CiConfigUnresolved, match=r"x\.yml:99999:3: cannot be read \(more than 100000 YAML nodes\)"
    ):
        parse_includes("l:\n" + "- 1\n" * 200_000, "x.yml")


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("/ci/build.yml", "ci/build.yml"),
        ("./ci//build.yml", "ci/build.yml"),
        ("envs/$ENV.yml", "envs/**.yml"),
        ("envs/${ENV}/%STAGE%.yml", "envs/**/**.yml"),
        ("ci/**/*.yml", "ci/**/*.yml"),
    ],
)
def test_paths_become_protected_patterns(path: str, pattern: str) -> None:
    """No leading slash or empty segment; a variable may be anything, slashes included."""
    assert as_pattern(path) == pattern


def test_the_directory_a_wildcard_is_listed_under() -> None:
    """The fixed directories before the first wildcard segment."""
    assert [literal_dir(p) for p in ("ci/parts/*.yml", "**.yml", "a/b*/c.yml")] == [
        "ci/parts",
        "",
        "a",
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Platform/CONFIG", True), ("/platform/config/", True), ("7", True), ("$GROUP/x", True)],
)
def test_a_project_name_may_mean_this_project(name: str, expected: bool) -> None:
    """Full path in any case, the id, or a name the bot cannot expand."""
    assert names(name, "platform/config", 7) is expected
    assert names("platform/other", "platform/config", 7) is False


def test_a_component_of_this_project_names_its_files() -> None:
    """`<host>/<project path>/<name>@<version>`: this project's, another's, a nested group's."""
    assert (
        component_name("gitlab.example.com/platform/config/lint@1.0", "platform/config") == "lint"
    )
    assert component_name("h/platform/configs/lint@1", "platform/config") is None
    assert component_name("h/g/sub/app/build@~latest", "g/sub/app") == "build"


def test_raw_urls_of_this_gitlab_name_a_project_file() -> None:
    """`-/raw/`, the legacy `raw/`, the files API; a relative root; another host is nothing."""
    root = "https://gitlab.example.com/gl"
    assert raw_target(f"{root}/g/app/-/raw/main/ci/x.yml?inline=false", root) == RawTarget(
        "g/app", (("main", "ci/x.yml"), ("main/ci", "x.yml"))
    )
    assert raw_target(f"{root}/g/app/raw/v1/x.yml", root) == RawTarget("g/app", (("v1", "x.yml"),))
    api = f"{root}/api/v4/projects/g%2Fapp/repository/files/ci%2Fx.yml/raw?ref=main"
    assert raw_target(api, root) == RawTarget("g/app", (("main", "ci/x.yml"),))
    assert raw_target("https://example.com/g/app/-/raw/main/x.yml", root) is None
    assert raw_target("https://gitlab.example.com/g/app/-/raw/main/x.yml", root) is None


def test_the_ci_config_path_forms() -> None:
    """Unset, a path, another project's file with and without a ref, a URL."""
    assert config_setting(None).local == ".gitlab-ci.yml"
    assert config_setting("ci/main.yml").local == "ci/main.yml"
    other = config_setting("ci.yml@group/sub/ci:stable")
    assert (other.file, other.project, other.ref) == ("ci.yml", "group/sub/ci", "stable")
    assert config_setting("ci.yml@group/ci").ref is None
    assert config_setting("https://example.com/ci.yml").url == "https://example.com/ci.yml"
