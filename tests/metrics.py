"""Reading metrics as a scrape shows them: the process's own and the database's gauges."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from bot.app.gauges import DatabaseCollector


def database_gauge(engine: Engine, name: str, labels: dict[str, str] | None = None) -> float | None:
    """A sample of the database's gauges as the next scrape of /metrics reads it (None: absent)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(engine))
    return registry.get_sample_value(name, labels)
