"""`gitops-bot policy check [FILE]`: problems as file:line:col and exit 1, a valid file "ok"
and exit 0; `policy schema` prints the committed schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gitops_bot.cli import main

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "policy.schema.json"


def invoke(*args: str) -> tuple[int, str]:
    """Runs `gitops-bot <args>`; (exit code, stdout and stderr)."""
    result = CliRunner().invoke(main, list(args), env={"GITOPS_DATABASE_URL": None})
    return result.exit_code, result.output


def test_a_valid_file_is_ok(tmp_path: Path) -> None:
    """A valid file exits 0 and says what it sets, and which server values it was held to."""
    file = tmp_path / "bot.yml"
    file.write_text("version: 1\ndeploy: {timeout: 600}\npaths: {allowed: [config/]}\n")
    code, out = invoke("policy", "check", str(file))
    assert code == 0
    assert out.strip() == (
        f"{file}: ok: version 1; sets deploy, paths (held to GITOPS_* and the flags' defaults)"
    )


def test_a_loosening_key_fails_the_check_naming_it(tmp_path: Path) -> None:
    """The step order, the queue off and a week of deploy timeout: each a file:line:col line
    naming the key, exit 1 (the server's 3,600 s comes from GITOPS_DEPLOY_TIMEOUT's default)."""
    file = tmp_path / "bot.yml"
    file.write_text(
        "workflow: {order: mr_first}\nmerge_queue: {enabled: false}\ndeploy: {timeout: 604800}\n"
    )
    code, out = invoke("policy", "check", str(file))
    assert code == 1
    keys = [line.split(": ")[1] for line in out.strip().splitlines()]
    assert keys == ["workflow.order", "merge_queue.enabled", "deploy.timeout"]
    assert "longer than the server's GITOPS_DEPLOY_TIMEOUT (3600 s)" in out


def test_the_default_file_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without FILE, .gitops/bot.yml of the current directory is checked."""
    (tmp_path / ".gitops").mkdir()
    (tmp_path / ".gitops" / "bot.yml").write_text("approvals: {required: 0}\n")
    monkeypatch.chdir(tmp_path)
    code, out = invoke("policy", "check")
    assert code == 1
    assert out.startswith(".gitops/bot.yml:1:23: approvals.required:")


def test_every_problem_is_printed_with_its_position(tmp_path: Path) -> None:
    """Two schema violations: two file:line:col lines, exit 1."""
    file = tmp_path / "bot.yml"
    file.write_text("version: 2\ndeploy:\n  timeout: -1\n")
    code, out = invoke("policy", "check", str(file))
    assert code == 1
    lines = out.strip().splitlines()
    assert [line.split(": ")[0] for line in lines] == [f"{file}:1:10", f"{file}:3:12"]


def test_a_yaml_syntax_error_and_a_missing_file(tmp_path: Path) -> None:
    """Broken YAML names its line; a file that is not there exits 1 too."""
    file = tmp_path / "bot.yml"
    file.write_text("paths:\n  allowed: [config/\n")
    code, out = invoke("policy", "check", str(file))
    assert (code, out.split(": ")[0]) == (1, f"{file}:3:1")
    code, out = invoke("policy", "check", str(tmp_path / "absent.yml"))
    assert code == 1
    assert "cannot read" in out


def test_policy_schema_prints_the_committed_schema() -> None:
    """`gitops-bot policy schema` is how docs/policy.schema.json is regenerated."""
    code, out = invoke("policy", "schema")
    assert (code, out) == (0, SCHEMA.read_text(encoding="utf-8"))


def test_a_deeply_nested_file_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    """A file nested far deeper than a policy needs, under the size limit: one file:line:col
    line and exit 1, as for any broken file."""
    file = tmp_path / "deep.yml"
    file.write_text("paths: " + "[" * 600 + "]" * 600 + "\n")
    code, out = invoke("policy", "check", str(file))
    assert (code, out.strip()) == (1, f"{file}:1:39: nested deeper than 32 levels")


def test_the_check_holds_the_file_to_the_flags_in_the_servers_database(tmp_path: Path) -> None:
    """With GITOPS_DATABASE_URL naming the bot's database, where the operator raised `apply` to
    Maintainer: `apply: developer` is a loosening there (exit 1), though not against the
    defaults; an unreadable database falls back to the defaults and says so."""
    from bot.store.engine import make_engine
    from bot.store.flags import set_flag
    from bot.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'bot.sqlite3'}"
    engine = make_engine(url)
    upgrade(engine)
    set_flag(engine, "commands.min_access", {"apply": 40})
    engine.dispose()
    file = tmp_path / "bot.yml"
    file.write_text("commands: {min_access: {apply: developer}}\n")
    result = CliRunner().invoke(
        main, ["policy", "check", str(file)], env={"GITOPS_DATABASE_URL": url}
    )
    assert result.exit_code == 1
    assert "commands.min_access.apply: developer is below the server's level" in result.output
    code, _ = invoke("policy", "check", str(file))
    assert code == 0
    broken = f"sqlite:///{tmp_path / 'nothing' / 'x.sqlite3'}"
    result = CliRunner().invoke(
        main, ["policy", "check", str(file)], env={"GITOPS_DATABASE_URL": broken}
    )
    assert result.exit_code == 0
    assert "the flags' defaults (sqlite:///" in result.output
