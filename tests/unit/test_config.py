"""Settings come from the environment once, default to the embedded mode and hide secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Settings


def test_no_database_or_redis_means_the_embedded_default() -> None:
    """With nothing set the bot runs on SQLite in the working directory and the in-process queue."""
    settings = Settings.from_env({})
    assert settings.embedded
    assert settings.redis_url is None
    assert settings.database_url == f"sqlite:///{Path('gitops-bot.sqlite3').resolve()}"
    assert (settings.port, settings.sweep_interval, settings.step_timeout) == (8000, 30, 600)


def test_environment_values_are_read_and_normalised() -> None:
    """A bare postgres URL gets psycopg 3; lists are split on commas; timings are integers."""
    settings = Settings.from_env(
        {
            "GITOPS_DATABASE_URL": "postgres://u@db/gitops",
            "GITOPS_REDIS_URL": "redis://r:6379/0",
            "GITOPS_APPROVER_TOKENS": "a, b,,c",
            "GITOPS_ALLOWED_PATHS": "config/,envs/",
            "GITOPS_GITLAB_URL": "https://gitlab.example.com/",
            "GITOPS_PIPELINE_TIMEOUT": "120",
            "PORT": "9000",
        }
    )
    assert settings.database_url == "postgresql+psycopg://u@db/gitops"
    assert not settings.embedded
    assert settings.approver_tokens == ("a", "b", "c")
    assert settings.allowed_paths == ("config/", "envs/")
    assert settings.gitlab_url == "https://gitlab.example.com"
    assert (settings.pipeline_timeout, settings.port) == (120, 9000)


def test_a_bad_number_is_a_clear_error() -> None:
    """A timing that is not a number names the variable instead of failing somewhere later."""
    with pytest.raises(ValueError, match="GITOPS_SWEEP_INTERVAL must be an integer"):
        Settings.from_env({"GITOPS_SWEEP_INTERVAL": "soon"})


def test_secrets_never_appear_in_repr() -> None:
    """Logging the settings cannot leak a token or a secret."""
    secrets = {
        "GITOPS_GITLAB_TOKEN": "glpat-author-secret",
        "GITOPS_APPROVER_TOKENS": "glpat-approver-secret",
        "GITOPS_WEBHOOK_SECRET": "hook-secret-value",
        "GITOPS_APPROVAL_SECRET": "approval-secret-value",
        "GITOPS_DEPLOY_SECRET": "deploy-secret-value",
        "GITOPS_API_TOKEN": "api-token-value",
    }
    text = repr(Settings.from_env(secrets))
    assert not [value for value in secrets.values() if value in text]
