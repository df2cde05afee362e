"""Completion callbacks' rules: which URLs may be called back, and a delivery's id. Pure.

A callback URL is allowed only when its parsed host (and port) is an entry of
GITOPS_CALLBACK_HOSTS, compared exactly: no pattern, no DNS, no redirect. An entry is
`host`, `host:port`, or either after `http://` (plain HTTP allowed for that host; every other
entry means HTTPS only). An entry without a port allows the scheme's default port only. IP
literals are refused in URLs and entries alike (decimal, octal, hex and IPv6 forms included):
an allow-list of names is what an operator can read.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

#: Longest callback URL accepted (the operations.callback_url column is this wide).
MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"https": 443, "http": 80}
#: A DNS name as an entry or URL may spell it: lower-case labels of letters, digits and hyphens.
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")
#: What the C resolver would read as an IPv4 address (`127.1`, `0x7f.0.0.1`, `2130706433`).
_NUMERIC = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+))*\.?$")


@dataclass(frozen=True, slots=True)
class AllowedHost:
    """One GITOPS_CALLBACK_HOSTS entry."""

    host: str
    port: int | None
    scheme: str

    def allows(self, scheme: str, host: str, port: int) -> bool:
        """Whether a URL with this scheme, host and port is this entry's (an `http://` entry
        allows HTTPS too)."""
        if scheme != self.scheme and self.scheme != "http":
            return False
        wanted = self.port if self.port is not None else _DEFAULT_PORTS[scheme]
        return (host, port) == (self.host, wanted)


def _ip_literal(host: str) -> bool:
    if host.startswith("[") or _NUMERIC.match(host):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_allowed(entries: tuple[str, ...]) -> tuple[AllowedHost, ...]:
    """GITOPS_CALLBACK_HOSTS's entries; ValueError naming the first malformed one."""
    return tuple(_entry(e) for e in entries)


def _entry(entry: str) -> AllowedHost:
    scheme, rest = "https", entry.strip()
    for prefix in ("http://", "https://"):
        if rest.lower().startswith(prefix):
            scheme, rest = prefix[:-3], rest[len(prefix) :]
    host, _, port_text = rest.partition(":")
    host = host.lower()
    port = None
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"GITOPS_CALLBACK_HOSTS: {entry!r} has no valid port")
        port = int(port_text)
    if _ip_literal(host) or not _HOST.match(host):
        raise ValueError(
            f"GITOPS_CALLBACK_HOSTS: {entry!r} is not a host name (`host`, `host:port`, "
            "optionally after `http://`; no path, no IP address)"
        )
    return AllowedHost(host, port, scheme)


def refusal(url: str, entries: tuple[str, ...]) -> str | None:
    """Why `url` may not be called back with these GITOPS_CALLBACK_HOSTS entries; None: it may."""
    if len(url) > MAX_URL_LENGTH:
        return f"is longer than {MAX_URL_LENGTH} characters"
    if not url.isascii() or any(c.isspace() or not c.isprintable() or c == "\\" for c in url):
        return "must be ASCII without spaces, control characters or backslashes"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in _DEFAULT_PORTS:
        return "must be an https:// URL"
    if "@" in parts.netloc:
        return "must not carry a user name or password"
    host = parts.hostname or ""
    if not host:
        return "has no host"
    if parts.fragment:
        return "must not have a #fragment"
    if _ip_literal(host):
        return "names an IP address; only host names listed in GITOPS_CALLBACK_HOSTS are called"
    allowed = parse_allowed(entries)
    here = port if port is not None else _DEFAULT_PORTS[parts.scheme]
    if any(a.allows(parts.scheme, host, here) for a in allowed):
        return None
    if any(a.host == host for a in allowed):
        return (
            f"{parts.scheme}://{_netloc(parts)} is not allowed: GITOPS_CALLBACK_HOSTS lists "
            f"{host} with another scheme or port (an entry without `http://` means HTTPS only)"
        )
    if not allowed:
        return "no callback host is allowed (GITOPS_CALLBACK_HOSTS is empty)"
    return f"{_netloc(parts)} is not listed in GITOPS_CALLBACK_HOSTS"


def _netloc(parts: SplitResult) -> str:
    host = parts.hostname or ""
    return host if parts.port is None else f"{host}:{parts.port}"


def host_of(url: str) -> str:
    """The host (and port) a callback URL names, for people: never its path or query."""
    try:
        return _netloc(urlsplit(url)) or "?"
    except ValueError:
        return "?"


def delivery_id(operation_id: str, phase: str) -> str:
    """The one id every delivery of this operation's entry into `phase` carries."""
    return f"{operation_id}:{phase}"
