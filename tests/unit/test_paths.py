"""bot/paths.py: what a change may touch, by example and over generated paths.

The API side of the same property (refused paths are 422, never 500) is tests/api/test_paths_api.py.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.paths import UnsafePath, normalise_path

PREFIXES = ("config/", "deploy/values.yaml")


@pytest.mark.parametrize(
    ("given_path", "expected"),
    [
        ("config/a.yaml", "config/a.yaml"),
        ("./config/./a.yaml", "config/a.yaml"),
        ("config/a.yaml/.", "config/a.yaml"),
        ("config/e\u0301.yaml", "config/\u00e9.yaml"),  # NFD spelt, NFC stored
        ("deploy/values.yaml", "deploy/values.yaml"),
        ("config/.gitignore", "config/.gitignore"),
        ("config/.github/ci.yml", "config/.github/ci.yml"),
        ("config/a..b", "config/a..b"),
    ],
)
def test_accepted_paths_come_back_normalised(given_path: str, expected: str) -> None:
    """Safe paths under an allowed prefix are returned in canonical form."""
    assert normalise_path(given_path, PREFIXES) == expected


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("", "empty"),
        ("/config/a.yaml", "absolute"),
        ("config/../x", "'..'"),
        ("..", "'..'"),
        ("config/a\x00", "control character"),
        ("config/a\nb", "control character"),
        ("config/\u200bhidden", "control character"),
        ("config/\ud800", "control character"),
        ("config\\a", "backslash"),
        ("config//a", "empty segment"),
        ("config/a/", "empty segment"),
        (".", "names no file"),
        ("./.", "names no file"),
        ("config/.git/config", ".git"),
        ("config/.Git/config", ".git"),
        ("config/.git /config", ".git"),
        ("config/GIT~1/config", ".git"),
        ("config/...", "dots and spaces"),
        ("config/ ", "dots and spaces"),
        ("config/" + "a" * 256, "longer than"),
        ("a/" * 600, "longer than"),
        ("configs/a.yaml", "outside the allowed paths"),
        ("config", "outside the allowed paths"),
        ("deploy/values.yamlx", "outside the allowed paths"),
        ("deploy/other.yaml", "outside the allowed paths"),
    ],
)
def test_refused_paths_say_why(bad: str, reason: str) -> None:
    """Each unsafe or disallowed path raises UnsafePath naming the path and the reason."""
    with pytest.raises(UnsafePath) as caught:
        normalise_path(bad, PREFIXES)
    assert caught.value.path == bad
    assert reason in caught.value.reason


def test_no_prefixes_allow_any_safe_relative_path() -> None:
    """Without allowed prefixes any safe relative path is accepted, unsafe ones still not."""
    assert normalise_path("anything/at/all.txt") == "anything/at/all.txt"
    with pytest.raises(UnsafePath):
        normalise_path(".git/config")


def test_prefix_match_is_on_whole_segments() -> None:
    """`config/` allows `config/a.yaml` and `config/sub/b`, never `configs/` or `config.bak`."""
    assert normalise_path("config/sub/b", ("config",)) == "config/sub/b"
    for outside in ("configs/a.yaml", "config.bak", "conf/a"):
        with pytest.raises(UnsafePath):
            normalise_path(outside, ("config/",))
        with pytest.raises(UnsafePath):
            normalise_path(outside, ("config",))


# -- generated paths -------------------------------------------------------------------------------

#: Pieces that should pass, and pieces that each break one rule; mixed with arbitrary text.
_SAFE = ["config", "deploy", "values.yaml", "a", "b", "a.yaml", ".gitignore", "ü", "日本", "~"]
_RISKY = [
    "..",
    ".",
    "",
    ".git",
    ".GIT",
    ".git.",
    ".git ",
    "git~1",
    "configs",
    "...",
    " ",
    "a\\b",
    "\\",
    "\x00",
    "a\x1fb",
    "\x7f",
    "\u202e",
    "\u200d",
    "\ud800",
    "\u2028",
    "e\u0301",
    "C:",
]
_SEGMENT = st.one_of(
    st.sampled_from(_SAFE),
    st.sampled_from(_SAFE),
    st.sampled_from(_SAFE),
    st.sampled_from(_RISKY),
    st.text(max_size=6),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), max_size=6),
)
PATHS = st.builds(
    lambda lead, segments, sep: lead + sep.join(segments),
    st.sampled_from(["", "", "", "", "", "/", "./", "../", "//"]),
    st.lists(_SEGMENT, max_size=6),
    st.sampled_from(["/", "/", "/", "/", "/", "//", "\\", "/./"]),
)
_PREFIX_SETS = st.sampled_from([(), ("config/",), PREFIXES, ("config",), ("a/b/",)])
_REFUSED = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    """An independent statement of the prefix rule, on the accepted (normalised) path."""
    if not prefixes:
        return True
    for prefix in prefixes:
        wanted = unicodedata.normalize("NFC", prefix).strip("/")
        if path.startswith(wanted + "/") or (not prefix.endswith("/") and path == wanted):
            return True
    return False


@settings(max_examples=2500, deadline=None)
@given(path=PATHS, prefixes=_PREFIX_SETS)
def test_whatever_is_accepted_is_safe(path: str, prefixes: tuple[str, ...]) -> None:
    """Any accepted path is relative, clean, outside .git and under an allowed prefix."""
    try:
        result = normalise_path(path, prefixes)
    except UnsafePath as exc:
        refused = exc
    else:
        refused = None
    if refused is not None:
        assert (refused.path, bool(refused.reason)) == (path, True)
        return
    segments = result.split("/")
    assert not result.startswith("/")
    assert "\\" not in result
    assert all(unicodedata.category(c) not in _REFUSED for c in result)
    assert all(s not in ("", ".", "..") and s.rstrip(". ") for s in segments)
    assert all(s.rstrip(". ").casefold() not in (".git", "git~1") for s in segments)
    assert _under(result, prefixes)
    assert unicodedata.is_normalized("NFC", result)
    assert normalise_path(result, prefixes) == result  # idempotent
