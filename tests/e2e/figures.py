"""Figures the scenarios measure (wall times, GitLab calls, recovery times), for the summary."""

from __future__ import annotations

import json
from pathlib import Path

#: name -> (value, unit), in the order measured
FIGURES: dict[str, tuple[float, str]] = {}
#: Where the figures of the last run are written (artifacts/ is not versioned).
OUT = Path(__file__).resolve().parents[2] / "artifacts" / "e2e-figures.json"


def record(name: str, value: float, unit: str = "s") -> None:
    """Keeps one figure (the last value wins when a scenario is repeated)."""
    FIGURES[name] = (round(value, 2), unit)


def lines() -> list[str]:
    """The figures as aligned lines."""
    width = max((len(name) for name in FIGURES), default=0)
    return [f"{name:<{width}}  {value:>8} {unit}" for name, (value, unit) in FIGURES.items()]


def save() -> None:
    """Writes the figures as JSON next to the other artifacts."""
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(
        json.dumps({k: {"value": v, "unit": u} for k, (v, u) in FIGURES.items()}, indent=2)
    )
