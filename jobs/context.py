"""The services of the process a job runs in: installed by whoever runs jobs, never built here.

RQ calls a job function with its ids and plain values only (RQ docs, "Considerations for jobs"),
so what the process is connected to cannot travel with the job. Whoever runs jobs installs the
services it built at start: the `worker` process's `ServicesWorker` and the embedded default's
`InProcess` around each job they perform, a test harness for as long as it runs. A job run in a
process that installed none raises `NotInstalled`; nothing here reads the environment or builds
anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bot.services import Services


class NotInstalled(RuntimeError):
    """A job ran in a process whose job runner installed no services."""


_installed: Services | None = None


def install(services: Services) -> None:
    """Makes `services` the ones this process's jobs run on (a runner or harness at start)."""
    global _installed
    _installed = services


def uninstall() -> None:
    """Forgets the installed services (a harness on its way out)."""
    global _installed
    _installed = None


@contextmanager
def installed(services: Services) -> Iterator[Services]:
    """`services` installed for the duration of the block; what was installed before, after."""
    global _installed
    before = _installed
    _installed = services
    try:
        yield services
    finally:
        _installed = before


def services() -> Services:
    """The services installed in this process, or NotInstalled naming who installs them."""
    if _installed is None:
        raise NotInstalled(
            "no services are installed in this process: jobs run in `gitops-bot worker` or "
            "`gitops-bot serve`, whose job runners install the services they built at start "
            "(tests: jobs.context.install(services) or `with jobs.context.installed(...)`)"
        )
    return _installed
