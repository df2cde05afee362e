"""How a job gets its services: installed by the runner that performs it, never built by the job.

The `worker` process's ServicesWorker and the in-process runner (the embedded default, tests)
install the services they were given around each job; a job run where none were installed fails
with NotInstalled instead of reading the environment. Job names resolve to their functions.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
from rq import Queue, SimpleWorker
from rq.job import Job

from bot import queueing
from bot.config import Settings
from bot.services import NoClients, Services
from jobs import context
from jobs.connection import QUEUE_NAME
from jobs.inprocess import InProcess
from jobs.queue import RQWorkQueue
from jobs.schedule import periodic_jobs
from jobs.sweep import sweep
from jobs.worker import ServicesWorker

#: The services each `record_installed` job found installed.
SEEN: list[Services] = []


def record_installed() -> None:
    """A job that notes which services it runs on."""
    SEEN.append(context.services())


def bare(redis: Any) -> Services:
    """Services on `redis` with no database (these jobs do no database work)."""
    queue = RQWorkQueue(redis)
    return Services(settings=Settings(), engine=None, queue=queue, redis=redis)  # type: ignore[arg-type]


@pytest.fixture
def services() -> Iterator[Services]:
    """Services on fakeredis."""
    built = bare(fakeredis.FakeRedis())
    SEEN.clear()
    yield built
    SEEN.clear()


def test_every_job_name_is_an_importable_function() -> None:
    """Each *_JOB in bot.queueing names a module-level function RQ can import, and the
    periodic jobs are registered under those names."""
    names = {value for key, value in vars(queueing).items() if key.endswith("_JOB")}
    for name in names:
        module, _, function = name.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function)), name
    assert {job.func for job in periodic_jobs(Settings())} <= names


def test_a_job_where_no_services_were_installed_fails_clearly() -> None:
    """A job function called where no runner installed services raises NotInstalled, naming
    who installs them; nothing is built from the environment."""
    with pytest.raises(context.NotInstalled, match="gitops-bot worker"):
        sweep()


def test_the_worker_runs_each_job_on_its_services(services: Services) -> None:
    """ServicesWorker (the `worker` process) performs a job with its services installed, and
    leaves none installed afterwards."""
    services.queue.enqueue(f"{__name__}.record_installed")

    ServicesWorker(services).work(burst=True)

    assert [services] == SEEN
    with pytest.raises(context.NotInstalled):
        context.services()


def test_a_plain_rq_worker_fails_the_job_instead_of_building_services(
    services: Services,
) -> None:
    """An RQ worker that installed nothing (say `rq worker` run by hand) fails the job with
    NotInstalled."""
    queue = Queue(QUEUE_NAME, connection=services.redis)
    job = queue.enqueue(f"{__name__}.record_installed")

    SimpleWorker([queue], connection=services.redis).work(burst=True)

    assert SEEN == []
    failed = Job.fetch(job.id, connection=services.redis)
    assert failed.is_failed
    assert "NotInstalled" in (failed.latest_result().exc_string or "")  # type: ignore[union-attr]


def test_the_in_process_runner_installs_its_services_per_job(services: Services) -> None:
    """InProcess (the embedded default and the harness) runs each job on its own services and
    puts back what was installed before."""
    other = bare(services.redis)
    services.queue.enqueue(f"{__name__}.record_installed")

    with context.installed(other):
        runner = InProcess(services)
        assert runner.burst() == 1
        assert context.services() is other

    assert [services] == SEEN
    assert runner.errors == []


def test_services_without_clients_say_so() -> None:
    """A step that calls out on services built without clients raises NoClients, not an
    AttributeError on None."""
    with pytest.raises(NoClients, match="build_services"):
        bare(fakeredis.FakeRedis()).require_clients()
