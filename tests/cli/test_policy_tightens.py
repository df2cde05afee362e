"""`gitops-bot policy check` refuses a policy file that would loosen the operator's environment
(a `paths.allowed` entry naming a built-in protected path, a command level below the server's)
at the entry's line and column, as the bot does when a change starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_policy import invoke


@pytest.mark.parametrize(
    ("entries", "where", "zone"),
    [
        ("[config/, .gitlab-ci.yml]", "3:22", ".gitlab-ci.yml"),
        ("[.gitlab/agents/]", "3:13", ".gitlab/"),
        ("[config/, docs/CODEOWNERS]", "3:22", "docs/CODEOWNERS"),
        ("[./.GITATTRIBUTES]", "3:13", ".gitattributes"),
        ("[.gitops/bot.yml]", "3:13", ".gitops/"),
        ("[.gitops/]", "3:13", ".gitops/"),
    ],
)
def test_an_allowed_entry_naming_a_protected_path_fails_the_check(
    tmp_path: Path, entries: str, where: str, zone: str
) -> None:
    """Exit 1 and `file:line:col: paths.allowed.N: ...` at the entry itself, naming the
    protected path it would allow."""
    file = tmp_path / "bot.yml"
    file.write_text(f"version: 1\npaths:\n  allowed: {entries}\n")
    code, out = invoke("policy", "check", str(file))
    assert code == 1
    [line] = out.strip().splitlines()
    assert line.startswith(f"{file}:{where}: paths.allowed.")
    assert f"would allow the protected path {zone}" in line


def test_each_such_entry_is_named_in_a_block_list(tmp_path: Path) -> None:
    """Two offending entries of a block list: two lines, each at its item."""
    file = tmp_path / "bot.yml"
    file.write_text("paths:\n  allowed:\n    - config/\n    - .gitlab-ci.yml\n    - .gitlab/\n")
    code, out = invoke("policy", "check", str(file))
    assert code == 1
    assert [line.split(": ")[0] for line in out.strip().splitlines()] == [
        f"{file}:4:7",
        f"{file}:5:7",
    ]


def test_broad_and_look_alike_entries_pass(tmp_path: Path) -> None:
    """Entries that name no protected path (`docs/`, `.gitopsx/`, `config/.gitlab-ci.yml`) and a
    higher command level are not errors: they only narrow (README)."""
    file = tmp_path / "bot.yml"
    text = (
        "paths: {allowed: [docs/, .gitopsx/, config/.gitlab-ci.yml], protected: [.gitlab-ci.yml]}"
        "\ncommands: {min_access: {apply: maintainer}}\n"
    )
    file.write_text(text)
    code, out = invoke("policy", "check", str(file))
    assert (code, out.strip()) == (
        0,
        f"{file}: ok: version 1; sets commands, paths (held to GITOPS_* and the flags' defaults)",
    )


def test_a_lower_command_level_fails_the_check(tmp_path: Path) -> None:
    """`apply: guest` (the server's level is Developer) is a loosening: exit 1, at the value."""
    file = tmp_path / "bot.yml"
    file.write_text("commands: {min_access: {apply: guest}}\n")
    code, out = invoke("policy", "check", str(file))
    assert code == 1
    assert out.startswith(f"{file}:1:32: commands.min_access.apply: guest is below")
