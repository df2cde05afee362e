"""Checks on a change's files before anyone is asked to approve it, and its preview.

`check_files` validates every file the change writes: the syntax of YAML, JSON and TOML files
(always, by extension), and a JSON Schema from the repository for the files a rule's glob names.
A failure is a `Problem` (file, line, column, validator, message); the approval step stops the
change on any (bot/app/steps/approval.py). `preview.py` builds the diffstat and unified diff
shown in the status comment and the approval request.

Everything checked is the repository's, written by people with Developer access, and treated as
an attacker's input: nothing it says makes the bot open a connection or read a local file
(`$ref` stays inside the repository at the change's commit: refs.py), patterns and globs run on
a linear-time engine (ecma_regex.py, bot/core/path_policy.py), and every parse and check runs
under a time budget that holds on any runner (budget.py: per file and per change); whatever the
content, the answer is a list of problems, never an exception.
"""

from __future__ import annotations

from bot.app.checks.budget import Budget
from bot.app.checks.files import (
    ChangedFile,
    Problem,
    ValidatorRule,
    changed_files,
    check_files,
    describe_problems,
    rules_for,
)

__all__ = [
    "Budget",
    "ChangedFile",
    "Problem",
    "ValidatorRule",
    "changed_files",
    "check_files",
    "describe_problems",
    "rules_for",
]
