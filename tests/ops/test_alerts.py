"""The Prometheus alert rules (deploy/prometheus): valid, unit-tested with promtool (every alert
fires in one test and stays quiet in another), and reading only metrics the bot exports."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import Engine

from bot.core.states import BindingState as S
from tests.api import Api
from tests.builders import make_operation

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "alerts.yml"
RULE_TESTS = RULES_DIR / "alerts.test.yml"
#: Where the Debian/Ubuntu `prometheus` package puts it (scripts/test installs it in CI).
PROMTOOL_FALLBACK = Path("/usr/bin/promtool")
SEVERITIES = {"critical", "warning"}
#: The modules a worker process runs: their metrics are registered as they are imported.
WORKER_MODULES = (
    "bot.approval.client",
    "jobs.drive",
    "jobs.hooks",
    "jobs.inbox",
    "jobs.outbox",
    "jobs.sweep",
)


def promtool() -> str:
    """promtool's path; a missing promtool fails the test (it must run, not be skipped)."""
    found = shutil.which("promtool") or (
        str(PROMTOOL_FALLBACK) if PROMTOOL_FALLBACK.exists() else None
    )
    if found is None:
        pytest.fail(
            "promtool is not installed: scripts/test installs it (the Debian/Ubuntu `prometheus` "
            "package, or promtool from a Prometheus release on the PATH)"
        )
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def alert_rules() -> list[dict[str, Any]]:
    """Every alerting rule of alerts.yml."""
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def rule_tests() -> list[dict[str, Any]]:
    """Every alert_rule_test of alerts.test.yml."""
    doc = yaml.safe_load(RULE_TESTS.read_text())
    assert doc["rule_files"] == [RULES.name]
    return [check for case in doc["tests"] for check in case.get("alert_rule_test", [])]


def test_the_rules_are_valid() -> None:
    """`promtool check rules` accepts alerts.yml."""
    result = run_promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_the_rules_unit_tests_pass() -> None:
    """`promtool test rules` passes alerts.test.yml."""
    result = run_promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_fires_in_a_test_and_stays_quiet_in_another() -> None:
    """Each alert of alerts.yml is expected to fire at least once and to stay quiet at least
    once, and the tests name no alert that does not exist."""
    names = {rule["alert"] for rule in alert_rules()}
    checks = rule_tests()
    fired = {check["alertname"] for check in checks if check.get("exp_alerts")}
    quiet = {check["alertname"] for check in checks if not check.get("exp_alerts")}
    assert names - fired == set(), "alerts never expected to fire"
    assert names - quiet == set(), "alerts never expected to stay quiet"
    assert (fired | quiet) - names == set(), "tests of alerts that do not exist"


def test_every_alert_waits_has_a_severity_a_summary_and_a_runbook() -> None:
    """Each alert has `for:`, a known severity, a summary and a runbook naming a gitops-bot
    command."""
    for rule in alert_rules():
        name = rule["alert"]
        assert rule.get("for"), f"{name}: no `for:`"
        assert rule.get("labels", {}).get("severity") in SEVERITIES, name
        annotations = rule.get("annotations", {})
        assert annotations.get("summary"), f"{name}: no summary"
        assert "gitops-bot " in annotations.get("runbook", ""), f"{name}: no gitops-bot command"


def exported(text: str) -> set[str]:
    """Every sample name the exposition can hold, from its families (a labelled counter not
    counted yet has a family and no sample)."""
    names: set[str] = set()
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in suffixes.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def test_every_metric_the_alerts_read_is_exported(db: Engine) -> None:
    """A scrape of the web's /metrics, with the worker's modules loaded (they count the
    transitions and the approval calls), exports every gitops_* metric the rules read."""
    for module in WORKER_MODULES:
        importlib.import_module(module)
    make_operation(db, S.MERGING)
    response = Api.build(db).client.get("/metrics")
    assert response.status_code == 200

    available = exported(response.get_data(as_text=True))
    used = {
        name
        for rule in alert_rules()
        for name in re.findall(r"\bgitops_[a-z0-9_]+", str(rule["expr"]))
    }
    assert used, "the rules read no gitops_* metric"
    assert used - available == set()


def test_a_missing_promtool_fails_saying_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without promtool the rules' tests fail (never skip), naming what installs it."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(f"{__name__}.PROMTOOL_FALLBACK", Path("/nonexistent/promtool"))
    with pytest.raises(pytest.fail.Exception, match="scripts/test installs it"):
        promtool()
