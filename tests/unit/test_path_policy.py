"""The path policy (pure): protected paths, CI include patterns, what "explicitly allowed"
means. Reading the includes themselves: tests/unit/test_ci_yaml.py."""

from __future__ import annotations

import pytest

from bot.core.path_policy import describe, included_by, protected_by, refused_paths


@pytest.mark.parametrize(
    ("path", "zone"),
    [
        (".gitlab-ci.yml", ".gitlab-ci.yml"),
        (".gitlab/issue_templates/bug.md", ".gitlab/"),
        ("CODEOWNERS", "CODEOWNERS"),
        ("docs/CODEOWNERS", "docs/CODEOWNERS"),
        (".gitattributes", ".gitattributes"),
        (".gitops/bot.yml", ".gitops/"),
        (".gitops/schemas/x.json", ".gitops/"),
        (".Gitlab-CI.yml", ".gitlab-ci.yml"),
        ("config/.gitlab-ci.yml", None),
        (".gitlab", None),
        ("docs/readme.md", None),
    ],
)
def test_protected_by_names_the_zone(path: str, zone: str | None) -> None:
    """Each protected file or folder is recognised (case-insensitively); look-alikes are not."""
    assert protected_by(path) == zone


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("ci/build.yml", "ci/build.yml"),
        ("ci/deploy/prod.yml", "ci/deploy/*.yml"),
        ("envs/production.yml", "envs/$ENVIRONMENT.yml"),
        ("ci/a/b/c.yml", "ci/**.yml"),
    ],
)
def test_included_paths_match_their_pattern(path: str, pattern: str) -> None:
    """Exact names, `*` within a segment, `**` across segments, variables as wildcards."""
    assert included_by(path, [pattern]) == pattern


def test_wildcards_stay_within_their_segment() -> None:
    """`ci/deploy/*.yml` does not protect ci/deploy/sub/x.yml nor ci/deploy/x.yaml."""
    assert included_by("ci/deploy/sub/x.yml", ["ci/deploy/*.yml"]) is None
    assert included_by("ci/deploy/x.yaml", ["ci/deploy/*.yml"]) is None


def test_refusals_say_why_for_each_path() -> None:
    """Unsafe, protected, CI-included and outside-the-allowed paths each get their reason."""
    found = refused_paths(
        ["../x", ".gitlab-ci.yml", "ci/build.yml", "other/x.yml", "config/a.yml"],
        allowed=("config/", "ci/"),
        ci_includes=["ci/build.yml"],
    )
    assert [(r.path, r.kind) for r in found] == [
        ("../x", "unsafe"),
        (".gitlab-ci.yml", "protected"),
        ("ci/build.yml", "protected"),
        ("other/x.yml", "outside"),
    ]
    assert "included by the CI configuration (ci/build.yml)" in found[2].reason
    assert describe(found, limit=2).endswith("and 2 more")


@pytest.mark.parametrize(
    ("allowed", "path", "ok"),
    [
        ((), ".gitlab-ci.yml", False),
        (("",), ".gitlab-ci.yml", False),
        (("/",), "CODEOWNERS", False),
        ((".gitlab-ci.yml",), ".gitlab-ci.yml", True),
        ((".gitlab/",), ".gitlab/ci/x.yml", True),
        ((".gitlab/agents/",), ".gitlab/agents/a/config.yaml", True),
        ((".gitlab/agents/",), ".gitlab/ci/x.yml", False),
        (("docs/",), "docs/CODEOWNERS", False),
        (("ci/",), "ci/build.yml", False),
        (("ci/build.yml",), "ci/build.yml", True),
    ],
)
def test_only_an_explicit_entry_allows_a_protected_path(
    allowed: tuple[str, ...], path: str, ok: bool
) -> None:
    """A broad prefix never allows a protected path or a CI include; naming it does."""
    refusals = refused_paths([path], allowed=allowed, ci_includes=["ci/build.yml"])
    assert (not refusals) is ok
