"""The per-repository policy file `.gitops/bot.yml`: its model (`model.py`), parsing with
positions (`parse.py`). Pure: no IO; the file is read by the GitLab adapter and recorded by the
store."""

from __future__ import annotations

from bot.policy.model import POLICY_PATH, Policy, Validator, policy_schema
from bot.policy.parse import MAX_POLICY_BYTES, MAX_POLICY_DEPTH, PolicyError, parse_policy

__all__ = [
    "MAX_POLICY_BYTES",
    "MAX_POLICY_DEPTH",
    "POLICY_PATH",
    "Policy",
    "PolicyError",
    "Validator",
    "parse_policy",
    "policy_schema",
]
