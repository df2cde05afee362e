"""Figures the scenarios measure (wall times, GitLab calls, recovery times), for the summary."""

from __future__ import annotations

import json
from pathlib import Path

#: name -> (value, unit), in the order measured
FIGURES: dict[str, tuple[float, str]] = {}
#: Figures recorded by the running test and not yet attached to its report (with pytest-xdist
#: the summary is printed by the controller, which learns them from the reports).
_UNREPORTED: list[tuple[str, float, str]] = []
#: The key of a figure in a test report's user_properties.
PROPERTY = "e2e_figure"
#: Where the figures of the last run are written (artifacts/ is not versioned).
OUT = Path(__file__).resolve().parents[2] / "artifacts" / "e2e-figures.json"


def record(name: str, value: float, unit: str = "s") -> None:
    """Keeps one figure (the last value wins when a scenario is repeated)."""
    FIGURES[name] = (round(value, 2), unit)
    _UNREPORTED.append((name, round(value, 2), unit))


def unreported() -> list[tuple[str, float, str]]:
    """The figures recorded since the last call, taken (each reaches one report only)."""
    taken = list(_UNREPORTED)
    _UNREPORTED.clear()
    return taken


def learn(name: str, value: float, unit: str) -> None:
    """Keeps a figure a report carried (the controller's copy of a worker's `record`)."""
    FIGURES[name] = (value, unit)


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
