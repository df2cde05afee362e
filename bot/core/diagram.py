"""Renders the transition table (or one request's path through it) as a Mermaid diagram."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bot.core.states import BindingState
from bot.core.table import TABLE, Transition


def _node(state: BindingState | None) -> str:
    return "[*]" if state is None else state.value


def mermaid(
    table: Iterable[Transition] = TABLE,
    *,
    highlight: BindingState | None = None,
) -> str:
    """The table as a `stateDiagram-v2`; one edge per (from, to) listing its events."""
    edges: dict[tuple[str, str], list[str]] = {}
    for row in table:
        label = row.event.value if row.guard is None else f"{row.event.value} [{row.guard}]"
        key = (_node(row.source), _node(row.target))
        if label not in edges.setdefault(key, []):
            edges[key].append(label)
    lines = ["stateDiagram-v2"]
    for (src, dst), labels in edges.items():
        lines.append(f"    {src} --> {dst} : {', '.join(labels)}")
    if highlight is not None:
        lines.append("    classDef current fill:#fde68a,stroke:#b45309,stroke-width:2px")
        lines.append(f"    class {highlight.value} current")
    return "\n".join(lines) + "\n"


def path_diagram(path: Sequence[tuple[BindingState | None, BindingState, str]]) -> str:
    """One request's path (from, to, event) in order, with its current state highlighted."""
    lines = ["stateDiagram-v2"]
    for src, dst, event in path:
        lines.append(f"    {_node(src)} --> {_node(dst)} : {event}")
    if path:
        lines.append("    classDef current fill:#fde68a,stroke:#b45309,stroke-width:2px")
        lines.append(f"    class {path[-1][1].value} current")
    return "\n".join(lines) + "\n"
