"""Checks on a change's files before anyone is asked to approve it, and its preview.

`check_files` validates every file the change writes: the syntax of YAML, JSON and TOML files
(always, by extension), and a JSON Schema from the repository for the files a rule's glob names.
A failure is a `Problem` (file, line, column, validator, message); the approval step stops the
change on any (bot/app/steps/approval.py). `preview.py` builds the diffstat and unified diff
shown in the status comment and the approval request.
"""

from __future__ import annotations

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
    "ChangedFile",
    "Problem",
    "ValidatorRule",
    "changed_files",
    "check_files",
    "describe_problems",
    "rules_for",
]
