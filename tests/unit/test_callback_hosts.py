"""GITOPS_CALLBACK_HOSTS: what an entry may be, and which URLs an allow-list lets through."""

from __future__ import annotations

import pytest

from bot.config import Settings
from bot.core.callbacks import AllowedHost, delivery_id, host_of, parse_allowed, refusal

HOSTS = ("hooks.example.com", "http://portal.internal:8080", "api.example.org:8443")


def test_entries_are_read_with_their_scheme_and_port() -> None:
    """`host`, `http://host:port` and `host:port` become exact (host, port, scheme) entries."""
    assert parse_allowed(HOSTS) == (
        AllowedHost("hooks.example.com", None, "https"),
        AllowedHost("portal.internal", 8080, "http"),
        AllowedHost("api.example.org", 8443, "https"),
    )
    settings = Settings.from_env({"GITOPS_CALLBACK_HOSTS": ",".join(HOSTS)})
    assert settings.callback_hosts == HOSTS


@pytest.mark.parametrize(
    "entry",
    ["10.0.0.5", "[::1]", "2130706433", "hooks.example.com/path", "hooks.example.com:0",
     "hooks.example.com:99999", "hooks.example.com:x", "*.example.com", "user@hooks.example.com"],
)  # fmt: skip
def test_a_malformed_entry_stops_the_process_at_startup(entry: str) -> None:
    """An entry that is no host name (an IP, a path, a pattern, a bad port) is a startup error."""
    with pytest.raises(ValueError, match="GITOPS_CALLBACK_HOSTS"):
        Settings.from_env({"GITOPS_CALLBACK_HOSTS": entry})


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/gitops?token=t",
        "https://HOOKS.example.com/",
        "https://hooks.example.com:443/",
        "http://portal.internal:8080/cb",
        "https://portal.internal:8080/cb",  # an http:// entry allows HTTPS too
        "https://api.example.org:8443/",
    ],
)
def test_listed_hosts_are_allowed(url: str) -> None:
    """Exactly the listed host, port and scheme pass."""
    assert refusal(url, HOSTS) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/",
        "https://hooks.example.com:8443/",
        "https://api.example.org/",
        "http://portal.internal/cb",
        "https://sub.hooks.example.com/",
        "https://hooks.example.com./",
        "https://hooks.example.com%2eevil.example/",
        "https://evil.example#@hooks.example.com/",
        "https://hooks.example.com@evil.example/",
        "https://169.254.169.254/latest/meta-data",
        "https://0177.0.0.1/",
        "https://[::ffff:127.0.0.1]/",
        "https://hooks.exämple.com/",
    ],
)
def test_everything_else_is_refused(url: str) -> None:
    """Other ports, schemes, subdomains, spellings, userinfo and IP literals are refused."""
    assert refusal(url, HOSTS) is not None


def test_nothing_is_allowed_without_entries() -> None:
    """An empty allow-list refuses every URL and says why."""
    assert refusal("https://hooks.example.com/", ()) == (
        "no callback host is allowed (GITOPS_CALLBACK_HOSTS is empty)"
    )


def test_what_people_see_of_a_url_and_a_delivery() -> None:
    """The host (and port) only, never path or query; the delivery id names operation and phase."""
    assert host_of("https://hooks.example.com:8443/p?token=secret") == "hooks.example.com:8443"
    assert delivery_id("op-1", "MERGED") == "op-1:MERGED"


def test_the_secret_is_kept_out_of_repr() -> None:
    """GITOPS_CALLBACK_SECRET never reaches a log line through the settings' repr."""
    settings = Settings.from_env({"GITOPS_CALLBACK_SECRET": "s3cret-value"})
    assert settings.callback_secret == "s3cret-value"
    assert "s3cret-value" not in repr(settings)
    assert settings.callback_timeout == 5.0
