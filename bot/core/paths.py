"""Which file paths a change may touch: safe, relative, outside .git, under an allowed prefix."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

#: Longest accepted path, in characters (GitLab's own limit on a file path is larger).
MAX_PATH_LENGTH = 1024
#: Longest accepted segment, in UTF-8 bytes (the usual file-system limit on a name).
MAX_SEGMENT_BYTES = 255

# Unicode categories refused anywhere in a path: control (Cc, NUL included), format (Cf: bidi
# overrides and zero-width characters that make two paths look alike in review), surrogates
# (Cs: not encodable, JSON can still carry them) and the line/paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# Names that Git on some file system takes for its own directory: `.git` in any case, with
# trailing dots or spaces (Windows/NTFS) or as its 8.3 short name -- the CVE-2014-9390 family;
# HFS+'s ignorable characters are all format characters, refused above. The bot writes through
# GitLab, but a refused name costs nothing and keeps a checkout on a laptop safe.
_GIT_NAMES = frozenset({".git", "git~1"})


class UnsafePath(ValueError):
    """A path a change may not touch; `.path` is what was given, `.reason` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path!r}: {reason}")
        self.path = path
        self.reason = reason


def normalise_path(path: str, allowed: Sequence[str] = ()) -> str:
    """The path in canonical form (NFC, no `.` segments), or UnsafePath saying why not.

    `allowed` are prefixes matched on whole segments (`config/` allows `config/a.yaml`, not
    `configs/a.yaml`); empty means any safe relative path.
    """
    if not path:
        raise UnsafePath(path, "is empty")
    if len(path) > MAX_PATH_LENGTH:
        raise UnsafePath(path, f"is longer than {MAX_PATH_LENGTH} characters")
    for char in path:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise UnsafePath(path, f"contains the control character U+{ord(char):04X}")
    if "\\" in path:
        raise UnsafePath(path, "contains a backslash")
    if path.startswith("/"):
        raise UnsafePath(path, "is absolute")
    segments = _segments(unicodedata.normalize("NFC", path))
    for segment in segments:
        if segment == "":
            raise UnsafePath(path, "has an empty segment (// or a trailing /)")
        if segment == "..":
            raise UnsafePath(path, "has a '..' segment")
        if not segment.rstrip(". "):
            # "...", " " or ". ": some file systems read them as "." or ".."
            raise UnsafePath(path, "has a segment made only of dots and spaces")
        if _is_git_dir(segment):
            raise UnsafePath(path, "is inside the .git directory")
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise UnsafePath(path, f"has a segment longer than {MAX_SEGMENT_BYTES} bytes")
    if not segments:
        raise UnsafePath(path, "names no file")
    if allowed and not any(_under(segments, prefix) for prefix in allowed):
        raise UnsafePath(path, "is outside the allowed paths (" + ", ".join(allowed) + ")")
    return "/".join(segments)


def _segments(path: str) -> list[str]:
    """The path's segments without `.` ones (which name the directory they are in)."""
    return [segment for segment in path.split("/") if segment != "."]


def _is_git_dir(segment: str) -> bool:
    """True for a segment some file system would resolve to Git's own directory."""
    return segment.rstrip(". ").casefold() in _GIT_NAMES


def _under(segments: list[str], prefix: str) -> bool:
    """True when the path lies under `prefix`, compared segment by segment.

    A prefix ending in `/` is a directory and needs something below it; one without may also
    name the file itself (`config/prod.yaml`).
    """
    wanted = [s for s in unicodedata.normalize("NFC", prefix).split("/") if s not in ("", ".")]
    if not wanted:
        return True
    if prefix.endswith("/") and len(segments) <= len(wanted):
        return False
    return segments[: len(wanted)] == wanted
