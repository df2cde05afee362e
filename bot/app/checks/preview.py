"""A change's preview: each file with its added and removed line counts, and one unified diff
against the target branch, cut past MAX_DIFF_LINES lines or MAX_DIFF_CHARS characters.

Built once, before the approval is requested, and stored on the operation (`preview`), so the
status comment and the approval request show the same thing without reading GitLab again.

The counts and the diff come from one matching of each file's lines (`_Matcher`), not from
difflib's defaults: its "autojunk" heuristic ignores every line that makes up more than 1% of a
file of 200 lines or more, so on repetitive files (YAML lists, generated manifests) it matches
almost nothing and counts the whole file as removed and added again. Matching without that
heuristic is quadratic, so its cost is bounded, in this order:

1. a file, or a piece of one, of at most SMALL_CELLS line pairs (200 x 200) is matched exactly,
   as difflib does without the heuristic (a file under 200 lines gets difflib's own diff);
2. a larger one first has the lines both sides start and end with matched, in linear time (a
   file that only grows or shrinks in one place costs nothing more, however long), and what is
   left of it is matched exactly when small (1);
3. otherwise it is cut at the lines that occur once on each side, in the same order (patience
   diff's anchors), and each piece between them is matched on its own, from 1;
4. exact matching and the anchor passes draw on one budget of MAX_MATCH_CELLS line pairs for the
   whole preview, all files together; a piece left once it is spent, or too large for it, is
   matched with difflib's heuristic, drawing on a budget of MAX_HEURISTIC_CELLS, and past that
   not matched at all (counted as rewritten). Both together stay around a second whatever the
   files; the heuristic's counts are a correct diff but may count a repetitive stretch without
   any unique line as rewritten, and the MR's own diff on GitLab stays the reference for those.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice, pairwise
from typing import Any

from bot.app.checks.files import ChangedFile
from bot.core.inert import show_hidden
from bot.render.preview import coverage

#: The diff shown is cut past this many lines...
MAX_DIFF_LINES = 200
#: ...or this many characters, whichever comes first (the full diff is on the MR).
MAX_DIFF_CHARS = 20_000
#: The most files whose current content is read for the preview (one read each); files past it
#: are listed without counts.
MAX_READS = 50
#: Lines of context around each change.
CONTEXT = 3
#: A middle part of at most this many line pairs (200 x 200) is matched exactly at once.
SMALL_CELLS = 40_000
#: The line pairs exact matching and anchor passes may visit for one preview, all files together
#: (difflib's exact matching of a repetitive piece of 1,000 x 1,000 lines takes about a third of
#: a second, and grows faster than the pairs it visits).
MAX_MATCH_CELLS = 1_000_000
#: The line pairs difflib's heuristic may look at for one preview once that is spent (its
#: worst, lines of a few hundred values in random order, takes about 0.6 s for these).
MAX_HEURISTIC_CELLS = 100_000_000

_Block = tuple[int, int, int]  # (start in a, start in b, length) of lines equal on both sides


def build_preview(
    files: Sequence[ChangedFile], originals: Mapping[str, str | None]
) -> dict[str, Any]:
    """The preview of `files` against `originals` (each path's content at the target branch,
    None: absent; a path missing from the mapping was not read): JSON for the operation."""
    listed: list[dict[str, Any]] = []
    diff: list[str] = []
    budget = _Budget()
    for file in files:
        if file.path not in originals:
            action = "delete" if file.content is None else "write"
            listed.append({"path": file.path, "action": action, "added": None, "removed": None})
            continue
        old = originals[file.path]
        action = "delete" if file.content is None else "create" if old is None else "update"
        before = (old or "").splitlines(keepends=True)
        after = (file.content or "").splitlines(keepends=True)
        matcher = _Matcher(before, after, budget)
        added = removed = 0
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                removed += i2 - i1
                added += j2 - j1
        listed.append({"path": file.path, "action": action, "added": added, "removed": removed})
        wanted = MAX_DIFF_LINES + 1 - len(diff)  # one more than is shown: then it is cut
        if wanted > 0:
            diff.extend(islice(_unified(file.path, matcher, action), wanted))
    shown, truncated = _cut(diff)
    return {"files": listed, "diff": "\n".join(shown), "truncated": truncated}


class _Matcher(difflib.SequenceMatcher[str]):
    """difflib's opcodes and hunks over matching blocks found within a budget (see the module's
    docstring), drawing on the preview's `budget`."""

    def __init__(self, a: list[str], b: list[str], budget: _Budget) -> None:
        super().__init__(None, a, b, autojunk=False)
        self.lines = (a, b)
        self._budget = budget
        self._blocks: list[difflib.Match] | None = None

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self._blocks is None:
            self._blocks = _matching_blocks(*self.lines, self._budget)
        return self._blocks


@dataclass(slots=True)
class _Budget:
    """The line pairs a preview's matching may still visit: exactly, and heuristically."""

    exact: int = MAX_MATCH_CELLS
    heuristic: int = MAX_HEURISTIC_CELLS


def _matching_blocks(a: Sequence[str], b: Sequence[str], budget: _Budget) -> list[difflib.Match]:
    """The blocks of lines `a` and `b` have in common, in order, ending with difflib's sentinel
    (len(a), len(b), 0). Walked with a stack of pieces still to match, never recursing."""
    found: list[_Block] = []
    pieces = [(0, len(a), 0, len(b))]
    while pieces:
        alo, ahi, blo, bhi = pieces.pop()
        cells = (ahi - alo) * (bhi - blo)
        if cells <= min(SMALL_CELLS, budget.exact):  # difflib's own matching, cheap here
            budget.exact -= cells
            found.extend(
                (alo + i, blo + j, n)
                for i, j, n in _difflib_blocks(a[alo:ahi], b[blo:bhi], autojunk=False)
            )
            continue
        size = _same_run(a, alo, ahi, b, blo, bhi, 1)
        if size:
            found.append((alo, blo, size))
            alo, blo = alo + size, blo + size
        size = _same_run(a, ahi - 1, alo - 1, b, bhi - 1, blo - 1, -1)
        if size:
            found.append((ahi - size, bhi - size, size))
            ahi, bhi = ahi - size, bhi - size
        if alo == ahi or blo == bhi:
            continue
        cells = (ahi - alo) * (bhi - blo)
        if cells > SMALL_CELLS and budget.exact >= (ahi - alo) + (bhi - blo):
            budget.exact -= (ahi - alo) + (bhi - blo)
            anchors = _anchors(a, alo, ahi, b, blo, bhi)
            if anchors:
                found.extend((i, j, 1) for i, j in anchors)
                edges = [(alo - 1, blo - 1), *anchors, (ahi, bhi)]
                pieces.extend(
                    (i + 1, i2, j + 1, j2)
                    for (i, j), (i2, j2) in pairwise(edges)
                    if i + 1 < i2 or j + 1 < j2
                )
                continue
        exact = cells <= budget.exact
        if exact:
            budget.exact -= cells
        elif cells <= budget.heuristic:
            budget.heuristic -= cells
        else:
            continue  # nothing of the piece is matched: it counts as rewritten
        found.extend(
            (alo + i, blo + j, n)
            for i, j, n in _difflib_blocks(a[alo:ahi], b[blo:bhi], autojunk=not exact)
        )
    return _merged(sorted(found), len(a), len(b))


def _same_run(
    a: Sequence[str], i: int, i_end: int, b: Sequence[str], j: int, j_end: int, step: int
) -> int:
    """How many lines are equal walking from a[i] and b[j] by `step` (not reaching the ends)."""
    n = 0
    while i != i_end and j != j_end and a[i] == b[j]:
        i, j, n = i + step, j + step, n + 1
    return n


def _anchors(
    a: Sequence[str], alo: int, ahi: int, b: Sequence[str], blo: int, bhi: int
) -> list[tuple[int, int]]:
    """Patience diff's anchors: the lines occurring once in a[alo:ahi] and once in b[blo:bhi],
    as (i, j), the longest run of them in the same order on both sides."""
    in_a = Counter(a[alo:ahi])
    in_b = Counter(b[blo:bhi])
    where_b = {b[j]: j for j in range(blo, bhi) if in_b[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(alo, ahi) if in_a[a[i]] == 1 and a[i] in where_b]
    # the longest increasing run of j (patience sorting: the smallest end of each length)
    ends: list[int] = []
    end_at: list[int] = []  # index into pairs of each length's end
    before: list[int] = []  # for each pair, the pair ahead of it in its run (-1: none)
    for index, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(ends, j)
        if length == len(ends):
            ends.append(j)
            end_at.append(index)
        else:
            ends[length] = j
            end_at[length] = index
        before.append(end_at[length - 1] if length else -1)
    run: list[tuple[int, int]] = []
    at = end_at[-1] if end_at else -1
    while at != -1:
        run.append(pairs[at])
        at = before[at]
    return run[::-1]


def _difflib_blocks(a: Sequence[str], b: Sequence[str], *, autojunk: bool) -> list[_Block]:
    """difflib's matching blocks of one piece (the heuristic one with `autojunk`), the longer
    side as difflib's `b`, whose popular lines the heuristic leaves out."""
    if autojunk and len(a) > len(b):
        return [(i, j, n) for j, i, n in _difflib_blocks(b, a, autojunk=True)]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=autojunk)
    return [(i, j, n) for i, j, n in matcher.get_matching_blocks() if n]


def _merged(blocks: list[_Block], len_a: int, len_b: int) -> list[difflib.Match]:
    """Sorted blocks with adjacent ones joined, and difflib's sentinel at the end."""
    out: list[difflib.Match] = []
    for i, j, n in blocks:
        if out and out[-1].a + out[-1].size == i and out[-1].b + out[-1].size == j:
            last = out.pop()
            out.append(difflib.Match(last.a, last.b, last.size + n))
        else:
            out.append(difflib.Match(i, j, n))
    out.append(difflib.Match(len_a, len_b, 0))
    return out


def _unified(path: str, matcher: _Matcher, action: str) -> Iterator[str]:
    """One file's unified diff lines (no line ends), `\\ No newline at end of file` kept: what
    difflib.unified_diff writes, from `matcher`'s hunks."""
    before = f"a/{path}" if action != "create" else "/dev/null"
    after = f"b/{path}" if action != "delete" else "/dev/null"
    a, b = matcher.lines
    for number, group in enumerate(matcher.get_grouped_opcodes(CONTEXT)):
        if number == 0:
            yield f"--- {before}"
            yield f"+++ {after}"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from _lines(" ", a[i1:i2])
                continue
            yield from _lines("-", a[i1:i2])
            yield from _lines("+", b[j1:j2])


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (difflib's _format_range_unified)."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return str(beginning)
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def _lines(mark: str, lines: Sequence[str]) -> Iterator[str]:
    for line in lines:
        if line.endswith("\n"):
            yield mark + line[:-1].removesuffix("\r")
        else:  # the last line of a file without a final newline
            yield mark + line
            yield "\\ No newline at end of file"


def _cut(lines: list[str]) -> tuple[list[str], bool]:
    """The first lines within both limits, and whether any were left out."""
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if len(kept) >= MAX_DIFF_LINES or size > MAX_DIFF_CHARS:
            return kept, True
        kept.append(line)
    return kept, False


def diffstat(preview: Mapping[str, Any]) -> list[str]:
    """The preview's files as plain lines ("update config/prod.yaml (+1 -1)"), for the approval
    request's summary; the same list the status comment shows."""
    lines: list[str] = []
    for entry in preview.get("files", []):
        counts = (
            f" (+{entry['added']} -{entry['removed']})" if entry.get("added") is not None else ""
        )
        lines.append(f"- {entry['action']} {entry['path']}{counts}")
    return lines


def preview_summary(preview: Mapping[str, Any], mr_url: str | None) -> list[str]:
    """The approval request's preview paragraphs: how much it shows, the diffstat (every file),
    then the diff (plain text, cut like the status comment's, with where the whole of it is)."""
    if not preview.get("files"):
        return []
    out = ["Preview (lines added and removed):\n" + "\n".join(diffstat(preview))]
    shown = coverage(preview)
    if shown is not None:
        where = f": {mr_url.rstrip('/')}/diffs" if mr_url else " once its merge request exists"
        out.insert(
            0, f"This preview is partial ({shown}); the whole change is on the merge request{where}"
        )
    if preview.get("diff"):
        out.append("Diff:\n" + show_hidden(str(preview["diff"])))
    return out
