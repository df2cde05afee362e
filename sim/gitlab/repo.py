"""A tiny git: commits hold whole trees; ancestry, merge bases, diffs and conflicts over them."""

from __future__ import annotations

import difflib
import hashlib
import heapq
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .errors import bad_request
from .model import Commit


def ancestors(commits: Mapping[str, Commit], sha: str) -> set[str]:
    """Every commit reachable from `sha`, itself included."""
    seen: set[str] = set()
    stack = [sha]
    while stack:
        current = stack.pop()
        if current in seen or current not in commits:
            continue
        seen.add(current)
        stack.extend(commits[current].parents)
    return seen


def _newest_first(
    commits: Mapping[str, Commit], starts: Mapping[str, int]
) -> Iterator[tuple[str, int]]:
    """Walks the history of `starts` (sha -> side bits) newest first, each commit once with the
    union of the sides that reach it. A commit is newer than its parents (seq), so when one is
    yielded every descendant of it on the way has been, and its bits are complete."""
    sides: dict[str, int] = {}
    heap: list[tuple[int, str]] = []
    for sha, bits in starts.items():
        if sha in commits:
            sides[sha] = sides.get(sha, 0) | bits
            heapq.heappush(heap, (-commits[sha].seq, sha))
    seen: set[str] = set()
    while heap:
        _, sha = heapq.heappop(heap)
        if sha in seen:
            continue
        seen.add(sha)
        bits = sides[sha]
        yield sha, bits
        for parent in commits[sha].parents:
            if parent in commits:
                sides[parent] = sides.get(parent, 0) | bits
                heapq.heappush(heap, (-commits[parent].seq, parent))


def is_ancestor(commits: Mapping[str, Commit], maybe_ancestor: str, sha: str) -> bool:
    """Whether `maybe_ancestor` is reachable from `sha` (a commit is its own ancestor); walks
    only the commits newer than it."""
    if maybe_ancestor not in commits:
        return False
    floor = commits[maybe_ancestor].seq
    for current, _ in _newest_first(commits, {sha: 1}):
        if current == maybe_ancestor:
            return True
        if commits[current].seq < floor:
            return False
    return False


def merge_base(commits: Mapping[str, Commit], a: str, b: str) -> str | None:
    """The newest common ancestor of two commits, or None for unrelated histories; walks only
    the commits newer than it."""
    for sha, bits in _newest_first(commits, {a: 1, b: 2} if a != b else {a: 3}):
        if bits == 3:
            return sha
    return None


def diff(base: Mapping[str, str], head: Mapping[str, str]) -> dict[str, str | None]:
    """Paths changed from `base` to `head`: new content, or None when deleted."""
    changed: dict[str, str | None] = {}
    for path in base.keys() | head.keys():
        if base.get(path) != head.get(path):
            changed[path] = head.get(path)
    return changed


def _changes_since_base(
    commits: Mapping[str, Commit], source: str, target: str
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """What each side changed since their merge base: (source side, target side)."""
    base = merge_base(commits, source, target)
    base_tree = commits[base].tree if base else {}
    return diff(base_tree, commits[source].tree), diff(base_tree, commits[target].tree)


def conflicting_paths(commits: Mapping[str, Commit], source: str, target: str) -> list[str]:
    """Paths both sides changed differently since their merge base."""
    ours, theirs = _changes_since_base(commits, source, target)
    return sorted(path for path in ours.keys() & theirs.keys() if ours[path] != theirs[path])


def combined_tree(commits: Mapping[str, Commit], source: str, target: str) -> dict[str, str]:
    """The target's tree with the source's changes since the merge base applied."""
    ours, _ = _changes_since_base(commits, source, target)
    tree = dict(commits[target].tree)
    for path, content in ours.items():
        if content is None:
            tree.pop(path, None)
        else:
            tree[path] = content
    return tree


def history(commits: Mapping[str, Commit], sha: str) -> list[Commit]:
    """Every commit reachable from `sha`, newest first."""
    return sorted((commits[s] for s in ancestors(commits, sha)), key=lambda c: -c.seq)


def apply_actions(tree: Mapping[str, str], actions: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """A new tree with the Commits API actions applied; GitLab's 400s for impossible ones."""
    result = dict(tree)
    for action in actions:
        kind = action.get("action")
        path = str(action.get("file_path", "")).lstrip("/")
        if not path:
            raise bad_request("file_path is missing")
        content = action.get("content")
        if kind == "create":
            if path in result:
                raise bad_request("A file with this name already exists")
            result[path] = "" if content is None else str(content)
        elif kind == "update":
            if path not in result:
                raise bad_request("A file with this name doesn't exist")
            result[path] = "" if content is None else str(content)
        elif kind == "delete":
            if path not in result:
                raise bad_request("A file with this name doesn't exist")
            del result[path]
        elif kind == "move":
            previous = str(action.get("previous_path", "")).lstrip("/")
            if previous not in result:
                raise bad_request("A file with this name doesn't exist")
            old = result.pop(previous)
            result[path] = old if content is None else str(content)
        else:
            raise bad_request("actions[action] does not have a valid value")
    return result


def commits_between(commits: Mapping[str, Commit], base: str, head: str) -> list[Commit]:
    """Commits reachable from `head` but not from `base`, oldest first (`git log base..head`);
    the walk stops once every commit still ahead of it is reachable from `base` too."""
    sides: dict[str, int] = {}
    heap: list[tuple[int, str]] = []
    only_ahead = 0  # commits in the heap reached from `head` alone (so far)

    def reach(sha: str, bits: int) -> None:
        nonlocal only_ahead
        if sha not in commits:
            return
        before = sides.get(sha)
        after = (before or 0) | bits
        if before is None:
            heapq.heappush(heap, (-commits[sha].seq, sha))
            only_ahead += after == 1
        elif before == 1 and after != 1:
            only_ahead -= 1
        sides[sha] = after

    reach(head, 1)
    reach(base, 2)
    found: list[Commit] = []
    done: set[str] = set()
    while heap and only_ahead:
        _, sha = heapq.heappop(heap)
        if sha in done:
            continue
        done.add(sha)
        bits = sides[sha]
        if bits == 1:
            only_ahead -= 1
            found.append(commits[sha])
        for parent in commits[sha].parents:
            reach(parent, bits)
    return sorted(found, key=lambda c: c.seq)


def _hunks(old: str | None, new: str | None) -> str:
    """A unified diff body as GitLab answers it: hunks only, no `---`/`+++` header."""
    before = (old or "").splitlines(keepends=True)
    after = (new or "").splitlines(keepends=True)
    out: list[str] = []
    for line in list(difflib.unified_diff(before, after, n=3))[2:]:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(f"{line}\n\\ No newline at end of file\n")
    return "".join(out)


def diff_entries(base: Mapping[str, str], head: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each changed path from `base` to `head` as GitLab's diff entity, sorted by path.

    Like git's rename detection (exact content only): a deleted path whose content reappears
    under an added path is one `renamed_file` entry with both paths.
    """
    changed = diff(base, head)
    added = sorted(p for p, content in changed.items() if content is not None and p not in base)
    deleted = sorted(p for p, content in changed.items() if content is None)
    renames: dict[str, str] = {}
    for old in deleted:
        match = next((n for n in added if n not in renames.values() and head[n] == base[old]), None)
        if match is not None:
            renames[old] = match
    entries: list[dict[str, Any]] = []
    for path in sorted(changed.keys() - set(renames.values())):
        old_path, new_path = path, renames.get(path, path)
        new_file, deleted_file = path not in base, path not in renames and changed[path] is None
        entries.append(
            {
                "old_path": old_path,
                "new_path": new_path,
                "a_mode": "0" if new_file else "100644",
                "b_mode": "0" if deleted_file else "100644",
                "new_file": new_file,
                "renamed_file": old_path != new_path,
                "deleted_file": deleted_file,
                "generated_file": False,
                "diff": _hunks(base.get(old_path), head.get(new_path)),
            }
        )
    return entries


def blob_id(content: str) -> str:
    """Git's blob object id of a file's content (`git hash-object`)."""
    data = content.encode()
    header = f"blob {len(data)}\0".encode()
    return hashlib.sha1(header + data, usedforsecurity=False).hexdigest()


def last_commit_for_path(commits: Mapping[str, Commit], sha: str, path: str) -> str:
    """The newest commit in `sha`'s history that changed `path` (`git log -1 -- path`).

    Follows git's history simplification: through a parent with the same content, else stops.
    """
    current = commits[sha]
    content = current.tree.get(path)
    walked: list[Commit] = []
    found = current.sha
    while True:
        cached = current.last_change.get(path)
        if cached is not None:
            found = cached
            break
        walked.append(current)
        same = next((p for p in current.parents if commits[p].tree.get(path) == content), None)
        if same is None:
            found = current.sha
            break
        current = commits[same]
    for commit in walked:  # a commit never changes: what it found stays true
        commit.last_change[path] = found
    return found


def tree_entries(
    tree: Mapping[str, str], under: str, recursive: bool
) -> list[dict[str, Any]] | None:
    """`GET /repository/tree` entries of a commit's tree under directory `under` ("" the root):
    its directories (`tree`) and files (`blob`), every depth with `recursive`, else one; sorted
    by path as Gitaly lists them. None when `under` is no directory of the tree (GitLab's 404
    "Tree Not Found")."""
    prefix = f"{under.strip('/')}/" if under.strip("/") else ""
    entries: dict[str, dict[str, Any]] = {}
    for path, content in tree.items():
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix) :].split("/")
        depth = len(parts) if recursive else 1
        for n in range(1, min(depth, len(parts)) + 1):
            sub = prefix + "/".join(parts[:n])
            blob = n == len(parts)
            oid = (
                hashlib.sha1(b"blob %d\0" % len(content.encode()) + content.encode()).hexdigest()
                if blob
                else hashlib.sha1(f"tree {sub}".encode()).hexdigest()
            )
            entries[sub] = {
                "id": oid,
                "name": parts[n - 1],
                "type": "blob" if blob else "tree",
                "path": sub,
                "mode": "100644" if blob else "040000",
            }
    if prefix and not entries:
        return None
    return [entries[path] for path in sorted(entries)]
