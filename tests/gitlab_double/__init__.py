"""The GitLab double now lives in `gitops_bot.fakes.gitlab` (the demo runs it too); re-exported
here so the suite's imports keep working."""

from __future__ import annotations

from gitops_bot.fakes.gitlab import *  # noqa: F403
from gitops_bot.fakes.gitlab import __all__ as __all__
