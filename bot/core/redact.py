"""Credentials kept out of anything printed: a URL's password (and a token-like query value), and
the configured secrets themselves wherever they appear in a text. Pure: no IO."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What a hidden value is shown as.
MASK = "***"
#: `scheme://user:password@` and `scheme://token@` (the user part of a URL holding a credential)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]*)@")
#: query parameters whose values are credentials
_SECRET_QUERY = re.compile(
    r"(?P<key>[?&](?:[A-Za-z_-]*(?:token|secret|password|passwd|key|signature|sig))=)"
    r"(?P<value>[^&#\s]*)",
    re.IGNORECASE,
)
#: secrets shorter than this are not searched for in text (they would mask ordinary words)
_MIN_SECRET = 6


def _userinfo(match: re.Match[str]) -> str:
    user, sep, _ = match.group("userinfo").partition(":")
    if sep:
        return f"{match.group('scheme')}{user}:{MASK}@"
    return f"{match.group('scheme')}{MASK}@"  # a bare userinfo is a token (https://TOKEN@host)


def mask_credentials(text: str) -> str:
    """`text` with every URL's password (or bare userinfo) and secret query values masked."""
    text = _USERINFO.sub(_userinfo, text)
    return _SECRET_QUERY.sub(lambda m: m.group("key") + MASK, text)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with URLs' credentials masked and every secret value (at least 6 characters)
    replaced wherever it appears."""
    for secret in sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return mask_credentials(text)
