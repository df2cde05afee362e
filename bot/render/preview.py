"""A change's preview in the status comment: its files with their added and removed line counts,
and its unified diff collapsed in `<details>`, cut past a limit with a link to the MR's changes.

Inert like the rest of the comment: each path is escaped text, and the diff sits in a quoted
code block (bot/core/inert.py quote_block) whose fence is longer than any backtick run in it, so
no line of it starts with `/`, and nothing in it mentions anyone, ends the `<details>` or renders
as Markdown or HTML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from bot.core.inert import quote_block
from bot.render.markdown import link, md_escape


def _counts(entry: Mapping[str, Any]) -> str:
    added, removed = entry.get("added"), entry.get("removed")
    if not isinstance(added, int) or not isinstance(removed, int):
        return ""
    return f" (+{added} -{removed})"


def files_shown(preview: Mapping[str, Any]) -> str | None:
    """How many of the change's files the counts and the diff cover, when not all ("55 files:
    line counts and diff for the first 50, the other 5 listed without"); None: all."""
    files = [e for e in preview.get("files", []) if isinstance(e, Mapping)]
    counted = sum(1 for e in files if e.get("added") is not None)
    if counted == len(files):
        return None
    return (
        f"{len(files)} files: line counts and diff for the first {counted}, the other "
        f"{len(files) - counted} listed without"
    )


def coverage(preview: Mapping[str, Any]) -> str | None:
    """How much of the change the preview shows, said outright (files_shown, and whether the
    diff is cut short); None when it shows every file whole."""
    parts = [files_shown(preview), "the diff is cut short" if preview.get("truncated") else None]
    return "; ".join(part for part in parts if part) or None


def preview_markdown(preview: Mapping[str, Any] | None, mr_url: str | None) -> Markup | None:
    """The preview section's Markdown; None when the change has none (yet)."""
    if not preview or not preview.get("files"):
        return None
    files = [e for e in preview["files"] if isinstance(e, Mapping)]
    added = sum(e["added"] for e in files if isinstance(e.get("added"), int))
    removed = sum(e["removed"] for e in files if isinstance(e.get("removed"), int))
    lines = [
        Markup(f"**Preview:** {len(files)} file{'s' if len(files) != 1 else ''}, ")
        + Markup(f"+{added} -{removed}"),
        "",
    ]
    lines += [
        Markup("- ")
        + md_escape(e.get("action", ""))
        + Markup(" ")
        + md_escape(e.get("path", ""))
        + Markup(_counts(e))
        for e in files
    ]
    shown = files_shown(preview)
    if shown is not None:
        lines += ["", Markup("_Partial preview: ") + md_escape(shown) + Markup("._")]
    block = quote_block(str(preview.get("diff") or ""), info="diff")
    if block:
        lines += ["", Markup("<details><summary>Diff</summary>"), "", Markup(block), ""]
        lines.append(Markup("</details>"))
    if preview.get("truncated"):
        whole = link("the whole diff", f"{mr_url.rstrip('/')}/diffs") if mr_url else None
        where = (
            whole + Markup(" is on the merge request")
            if whole
            else Markup("the whole diff will be on the merge request")
        )
        lines += ["", Markup("_The diff is cut short; ") + where + Markup("._")]
    return Markup("\n").join(lines)
