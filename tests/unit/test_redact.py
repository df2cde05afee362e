"""Credentials are never printed: URLs' passwords and the configured secrets are masked in the
settings' repr and in anything doctor says."""

from __future__ import annotations

from bot.config import Settings
from bot.core.redact import mask_credentials, redact


def test_url_passwords_and_token_queries_are_masked() -> None:
    """user:password@, a bare token@ and ?private_token= lose their secret, keep the rest."""
    assert mask_credentials("postgresql://bot:s3cret@db:5432/x") == "postgresql://bot:***@db:5432/x"
    assert mask_credentials("https://glpat-abc@gitlab.example/x") == "https://***@gitlab.example/x"
    assert mask_credentials("https://a.example/x?private_token=abc&y=1") == (
        "https://a.example/x?private_token=***&y=1"
    )
    assert mask_credentials("https://gitlab.example.com") == "https://gitlab.example.com"


def test_configured_secrets_are_masked_wherever_they_appear() -> None:
    """A token quoted inside an error message is masked; short values are left alone."""
    text = "401 for token glpat-0123456789 at https://u:p@h"
    assert redact(text, ["glpat-0123456789", "abc"]) == "401 for token *** at https://u:***@h"


def test_the_settings_repr_holds_no_secret() -> None:
    """Passwords in the database, Redis and approval URLs and every token stay out of repr()."""
    settings = Settings.from_env(
        {
            "GITOPS_DATABASE_URL": "postgresql://bot:dbpass@db/x",
            "GITOPS_REDIS_URL": "redis://:redispass@r:6379/0",
            "GITOPS_APPROVAL_URL": "https://user:approvalpass@approvals.example",
            "GITOPS_GITLAB_TOKEN": "glpat-author-token",
            "GITOPS_APPROVER_TOKENS": "glpat-approver-1",
            "GITOPS_WEBHOOK_SECRET": "hook-secret-value",
        }
    )
    shown = repr(settings)
    for secret in ("dbpass", "redispass", "approvalpass", "glpat-", "hook-secret-value"):
        assert secret not in shown
    assert "approvals.example" in shown
    assert "bot:***@db" in shown
