"""build_services(): the one place that turns Settings into the objects a process runs on.

Every process builds its services once, at start, and passes them down: the web app through
`create_app(services)`, the worker through its RQ worker class, the embedded default through its
in-process runner, the CLI to the command it runs. Nothing below builds services of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import OperationalError, ProgrammingError

from bot.approval import ApprovalClient
from bot.config import Settings
from bot.gitlab import ApproveComponent, approver_accounts, author_account
from bot.services import Clients, Services
from bot.store.engine import make_engine
from jobs.connection import make_redis
from jobs.queue import RQWorkQueue


class DatabaseUnusable(Exception):
    """The database cannot be reached or has no schema; the message says where and what to do."""


def build_clients(settings: Settings) -> Clients:
    """The GitLab accounts (author, approvers), the approve component, the approval client."""
    return Clients(
        author=author_account(settings),
        approvers=approver_accounts(settings),
        approve=ApproveComponent(),
        approval=ApprovalClient(settings.approval_url),
    )


def build_services(settings: Settings) -> Services:
    """Engine, Redis (or fakeredis when embedded), the work queue and the clients to the world."""
    redis = make_redis(settings)
    return Services(
        settings=settings,
        engine=make_engine(settings.database_url),
        queue=RQWorkQueue(redis),
        redis=redis,
        clients=build_clients(settings),
    )


@contextmanager
def database_errors(services: Services) -> Iterator[None]:
    """A database that cannot be used becomes one DatabaseUnusable line instead of a traceback."""
    try:
        yield
    except (OperationalError, ProgrammingError) as exc:
        where = services.engine.url.render_as_string(hide_password=True)
        raise DatabaseUnusable(
            f"the database at {where} cannot be used ({type(exc.orig).__name__}); "
            "is it reachable, and has `gitops-bot db upgrade` been run?"
        ) from None
