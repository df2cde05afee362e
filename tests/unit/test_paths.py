"""bot/paths.py: what a change may touch, by example and over generated paths.

The API side of the same property (refused paths are 422, never 500) is tests/api/test_paths_api.py,
which runs the 10,000 paths of `generated_paths()` below through POST /api/v1/changes.
"""

from __future__ import annotations

import posixpath
import random
import unicodedata
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.paths import UnsafePath, normalise_path

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


# -- 10,000 seeded hostile paths (shared with tests/api/test_paths_api.py) -------------------------

#: Names that belong in a config repository.
_NAMES = [
    "app.yaml",
    "prod.yaml",
    "values.yaml",
    "a",
    "b.json",
    "sub",
    "team-a",
    "x_y.toml",
    ".gitignore",
    ".github",
    "a..b",
    "~",
    "-rf",
    "CON",
    "ü.yaml",
    "日本.yaml",
    "e\u0301.yaml",  # NFD: stored as NFC
    "%2e%2e",  # literal percent signs: a file name, not a traversal
    "..a",
    "a.",  # trailing dot inside a longer name is allowed by the rules
]
#: Segments that each break a rule, or try to look like something they are not.
_HOSTILE = [
    "..",
    ".",
    "",
    "...",
    " ",
    ". ",
    ".. ",
    ".git",
    ".GIT",
    ".Git",
    ".git.",
    ".git ",
    ".git. .",
    "git~1",
    "GIT~1",
    ".git\u200c",  # zero-width non-joiner: Cf
    "\x00",
    "a\x00b",
    "\n",
    "\r",
    "\t",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u202e",  # right-to-left override
    "\u200b",
    "\ufeff",
    "\u2028",
    "\u2029",
    "\ud800",
    "\udfff",
    "..\\..",
    "C:",
    "c:\\windows",
    "\\",
    "%2e%2e%2f",
    "..%2f",
    "%252e%252e",
    "%00",
    "\u2024\u2024",  # one-dot leaders
    "\u2025",  # two-dot leader
    "\uff0e\uff0e",  # fullwidth full stops
    "config\u2215..",  # division slash
    "config\uff0f..",  # fullwidth solidus
    "\u29f8",
    "a" * 256,  # longer than a file name may be
    "\u00e9" * 128,  # 256 bytes in UTF-8
    "x" * 255,
]
#: First segments that are almost an allowed prefix (config/, deploy/values.yaml).
_CONFUSABLE = [
    "configs",
    "config-evil",
    "config.bak",
    "config_",
    "Config",
    "CONFIG",
    "config ",
    "config.",
    "c\u043enfig",  # Cyrillic o
    "\uff43\uff4f\uff4e\uff46\uff49\uff47",  # fullwidth "config"
    "con\u200bfig",
    "conf",
    "deploy",
    "deploy/values.yaml.bak",
    "deploy/values.yamlx",
    "deploy/values",
    "deploy/other.yaml",
    "deploy/Values.yaml",
    "deploy\\values.yaml",
    "etc",
    "home/user",
    ".git",
]
_ALLOWED_STARTS = [
    "config/",
    "./config/",
    "config/./",
    "deploy/values.yaml",
    "./deploy/values.yaml",
]
_LEADS = ["", "", "", "/", "//", "./", "../", "~/", "\\", "C:/", "file://", "/etc/", "\\\\srv\\"]
_SEPARATORS = ["/", "/", "/", "//", "\\", "/./", "/../"]
_TEMPLATES = [
    "config/../{n}",
    "config/../../etc/{n}",
    "config/sub/../../{n}",
    "config/./../{n}",
    "./../config/{n}",
    "deploy/values.yaml/../../{n}",
    "deploy/values.yaml/../{n}",
    "config/{n} -> ../../etc/passwd",
    "config/link/../../../{n}",
    "config/.git/hooks/{n}",
    "config/sub/.git/{n}",
    ".git/config",
    "config/{n}/",
    "config//{n}",
    "config/{n}\\..\\..\\x",
    "/config/{n}",
    "//config/{n}",
    "\\config\\{n}",
    "config/%2e%2e/%2e%2e/{n}",
    "config%2f..%2f..%2f{n}",
    "config/\u2025/{n}",
    "config/{n}\x00.yaml",
    "config/{n}\n.yaml",
    "config/\u202e{n}",
]
#: Characters for free text: ASCII, controls, separators, dots, look-alikes, surrogates, CJK.
_CHARS = (
    "abcxyz019._-~ /\\%:"
    "\x00\x01\x1f\x7f\x85\xa0\u00e9\u0301\u0435\u043e"
    "\u200b\u200d\u202e\u2024\u2025\u2028\u2215\u29f8\ufeff\uff0e\uff0f\ud800\u65e5"
)


def generated_paths(count: int, seed: int = 8) -> list[str]:
    """`count` distinct file paths, hostile and valid mixed; the same list for the same seed.

    About a third land inside config/ or deploy/values.yaml; the rest try traversal, absolute
    and drive paths, backslashes, URL encoding, Unicode look-alikes, controls and NUL, .git,
    symlink-looking names, prefix confusion, empty segments and the length limits.
    """
    rng = random.Random(seed)
    kinds = [_inside_ish] * 5 + [_mixed] * 2 + [_confusable] * 2 + [_template, _free_text, _long]
    seen: set[str] = set()
    paths: list[str] = []
    while len(paths) < count:
        path = rng.choice(kinds)(rng)
        if path not in seen:
            seen.add(path)
            paths.append(path)
    return paths


def _names(rng: random.Random, most: int) -> list[str]:
    return [rng.choice(_NAMES) for _ in range(rng.randint(0, most))]


def _inside_ish(rng: random.Random) -> str:
    """An allowed start and names under it; half of them with one hostile segment slipped in."""
    segments = _names(rng, 4) or [rng.choice(_NAMES)]
    if rng.random() < 0.45:
        segments.insert(rng.randint(0, len(segments)), rng.choice(_HOSTILE))
    start = rng.choice(_ALLOWED_STARTS)
    if not start.endswith("/"):
        start += "/" if segments and rng.random() < 0.7 else ""
        if not start.endswith("/"):
            return start
    return start + "/".join(segments)


def _mixed(rng: random.Random) -> str:
    pool = rng.choice([_NAMES, _HOSTILE, _CONFUSABLE, ["config", "deploy", "values.yaml"]])
    segments = [
        rng.choice(pool if rng.random() < 0.6 else _HOSTILE) for _ in range(rng.randint(1, 5))
    ]
    sep = rng.choice(_SEPARATORS)
    return rng.choice(_LEADS) + sep.join(segments)


def _confusable(rng: random.Random) -> str:
    return rng.choice(_CONFUSABLE) + "/" + "/".join(_names(rng, 2) or ["x.yaml"])


def _template(rng: random.Random) -> str:
    return rng.choice(_TEMPLATES).format(n=rng.choice([*_NAMES, "passwd", "x", "id_rsa"]))


def _free_text(rng: random.Random) -> str:
    text = "".join(rng.choice(_CHARS) for _ in range(rng.randint(0, 24)))
    return rng.choice(["", "", "config/", "deploy/values.yaml/"]) + text


def _long(rng: random.Random) -> str:
    """Paths around MAX_PATH_LENGTH (1024 characters) and MAX_SEGMENT_BYTES (255 bytes)."""
    if rng.random() < 0.5:
        length = rng.randint(1015, 1035)
        body = "/".join(["d" * rng.randint(1, 40) for _ in range(60)])
        return ("config/" + body)[:length].rstrip("/") + "/" + rng.choice(_NAMES)
    size = rng.randint(250, 260)
    return "config/" + rng.choice(["n", "\u00e9", "\u65e5"]) * (
        size // 3 if rng.random() < 0.3 else size
    )


def safely_inside(path: str, prefixes: tuple[str, ...]) -> bool:
    """An independent statement of what an accepted path must be: relative, clean (what
    posixpath.normpath leaves alone), NFC, no controls, outside .git, under an allowed prefix."""
    segments = path.split("/")
    return (
        bool(path)
        and not path.startswith("/")
        and "\\" not in path
        and posixpath.normpath(path) == path
        and all(s not in ("", ".", "..") and s.rstrip(". ") for s in segments)
        and all(s.rstrip(". ").casefold() not in (".git", "git~1") for s in segments)
        and all(unicodedata.category(c) not in _REFUSED for c in path)
        and unicodedata.is_normalized("NFC", path)
        and _under(path, prefixes)
    )


def expected_form(path: str) -> str:
    """The canonical form an accepted path is stored in: NFC, without `.` segments."""
    return "/".join(s for s in unicodedata.normalize("NFC", path).split("/") if s != ".")


def test_ten_thousand_generated_paths_are_accepted_only_inside_the_prefixes() -> None:
    """normalise_path over generated_paths(10_000): every accepted path is safely inside and in
    canonical form; every refusal names a reason; each kind of refusal is exercised."""
    accepted, reasons = 0, Counter[str]()
    for path in generated_paths(10_000):
        try:
            result = normalise_path(path, PREFIXES)
        except UnsafePath as exc:
            refused = exc
        else:
            refused = None
        if refused is not None:
            assert refused.path == path
            reasons[refused.reason.split(" (")[0]] += 1
            continue
        accepted += 1
        assert safely_inside(result, PREFIXES), (path, result)
        assert result == expected_form(path)
    assert accepted >= 2_000
    assert sum(reasons.values()) >= 5_000
    for reason in ("'..'", "absolute", "backslash", "control character", ".git", "outside"):
        assert sum(n for r, n in reasons.items() if reason in r) >= 50, (reason, reasons)
