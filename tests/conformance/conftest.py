"""The workflow tests' bot fixtures, for the conformance matrix."""

from tests.workflow.conftest import make_bot, redis

__all__ = ["make_bot", "redis"]
