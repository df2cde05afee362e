"""The GitLab behaviour catalogue: docs/gitlab-behaviour.yaml, rendered into
docs/gitlab-behaviour.md.

`python -m tests.catalogue` rewrites the page from the data file; tests/docs/
test_gitlab_behaviour.py checks that the page is the rendering, that every row is complete and
every test it names exists, and that every REST path the bot calls has a row.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "gitlab-behaviour.yaml"
PAGE = ROOT / "docs" / "gitlab-behaviour.md"

#: The areas, in the page's order.
AREAS = (
    "merge requests",
    "approvals",
    "pipelines",
    "merge trains",
    "protected branches",
    "notes",
    "award emoji",
    "repository files",
    "compare",
    "commits",
    "branches/tags",
    "labels",
    "hooks/webhooks",
    "version",
    "deployments",
    "projects/members",
    "users/tokens",
)
#: Fields every row has (`editions` and `endpoints` are optional).
REQUIRED = ("id", "area", "behaviour", "versions", "source", "bot", "tests")

GITLAB = "https://gitlab.com/gitlab-org/gitlab"
_MR = re.compile(r"(?<![\w/])!(\d+)")
_ISSUE = re.compile(r"(?<![\w/&])#(\d+)")
_GITLABHQ = re.compile(r"^gitlabhq (\S+)(.*)$")
_DOCS_SITE = re.compile(r"^(docs\.gitlab\.com/\S+)(.*)$")


def load(path: Path = DATA) -> list[dict[str, Any]]:
    """The catalogue's rows, in the file's order."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows = data["rows"] if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: expected a mapping with a list under `rows`")
    return [row for row in rows if isinstance(row, dict)]


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _references(text: str) -> str:
    """GitLab merge requests (!N) and issues (#N) as links."""
    text = _MR.sub(lambda m: f"[!{m[1]}]({GITLAB}/-/merge_requests/{m[1]})", text)
    return _ISSUE.sub(lambda m: f"[#{m[1]}]({GITLAB}/-/issues/{m[1]})", text)


def _source(entry: object) -> str:
    """One source: a gitlabhq path links to the file in GitLab's repository, a docs page to
    the page; merge requests and issues to theirs."""
    text = _one_line(entry)
    found = _GITLABHQ.match(text)
    if found:
        path, rest = found[1], found[2]
        return f"gitlabhq [`{path}`]({GITLAB}/-/blob/master/{path}){_references(rest)}"
    found = _DOCS_SITE.match(text)
    if found:
        return f"[{found[1]}](https://{found[1]}){_references(found[2])}"
    return _references(text)


def _test(name: str) -> str:
    path = name.split("::", 1)[0]
    return f"[`{name}`](../{path})"


def _row(row: dict[str, Any]) -> list[str]:
    lines = [f"### `{row['id']}`", "", _one_line(row["behaviour"]), ""]
    lines.append(f"- **Versions:** {_one_line(row['versions'])}")
    if row.get("editions"):
        lines.append(f"- **Editions:** {_one_line(row['editions'])}")
    endpoints = row.get("endpoints") or []
    if endpoints:
        lines.append("- **Endpoints:** " + ", ".join(f"`{e}`" for e in endpoints))
    lines.append(f"- **The bot:** {_one_line(row['bot'])}")
    tests = row.get("tests") or []
    if tests:
        lines.append("- **Tests:**")
        lines.extend(f"  - {_test(str(t))}" for t in tests)
    else:
        lines.append("- **Tests:** pending (issue 23: the test is being written)")
    lines.append("- **Source:**")
    lines.extend(f"  - {_source(s)}" for s in row["source"])
    lines.append("")
    return lines


def _anchor(area: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", area).replace(" ", "-")


def render(rows: list[dict[str, Any]] | None = None) -> str:
    """The page for `rows` (the catalogue's when None), grouped by area in AREAS' order."""
    rows = load() if rows is None else rows
    by_area: dict[str, list[dict[str, Any]]] = {area: [] for area in AREAS}
    for row in rows:
        by_area.setdefault(str(row["area"]), []).append(row)
    lines = [
        "# GitLab behaviour catalogue",
        "",
        "<!-- Generated from docs/gitlab-behaviour.yaml by `python -m tests.catalogue`;",
        "     edit the YAML, not this page. -->",
        "",
        "Every GitLab behaviour the bot relies on: what GitLab does (endpoint, method, status code",
        "or field), the GitLab versions it holds for, where that comes from in GitLab's own source",
        "and documentation, what the bot does about it, and the tests that show it. A row marked",
        "*pending* is a behaviour of issue 23 whose test is being written.",
        "",
        f"{len(rows)} rows. Versions marked *unverified* could not be confirmed from GitLab's",
        "history; the row says what was read.",
        "",
    ]
    lines.extend(
        f"- [{area}](#{_anchor(area)}): {len(found)}" for area, found in by_area.items() if found
    )
    lines.append("")
    for area, found in by_area.items():
        if not found:
            continue
        lines.extend([f"## {area}", ""])
        for row in found:
            lines.extend(_row(row))
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    """Rewrites docs/gitlab-behaviour.md from docs/gitlab-behaviour.yaml."""
    PAGE.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE.relative_to(ROOT)}\n")


if __name__ == "__main__":
    main()
