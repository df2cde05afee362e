"""The checks of what the bot runs on and calls besides GitLab: the database, the queue, the
approval system, its own public URL and the completion callbacks' settings."""

from __future__ import annotations

from datetime import datetime

from redis.exceptions import RedisError

from bot.app.doctor.checklist import MISS, OK, SKIPPED, Check
from bot.approval import ApprovalCallFailed, ApprovalNotFound, ApprovalUnavailable
from bot.approval.reach import http_status
from bot.config import Settings
from bot.services import Services
from bot.store.health import schema_state
from bot.store.inbox import DELIVERIES_WINDOW, quarantined_since

#: An approval id no approval system hands out: its status read shows the system answers.
PROBE_ID = "gitops-bot-doctor-probe"


def check_database(services: Services) -> Check:
    """The database answers and is migrated to the head revision."""
    where = services.engine.url.render_as_string(hide_password=True)
    state = schema_state(services.engine)
    if state.error is not None:
        return Check(
            "database",
            MISS,
            f"{where} cannot be reached ({state.error})",
            "check GITOPS_DATABASE_URL, that the database runs and that this host reaches it",
        )
    if not state.at_head:
        return Check(
            "database",
            MISS,
            f"{where} is at revision {state.current or '(none: no schema)'}, head is {state.head}",
            "run `gitops-bot db upgrade` (serve and web also migrate at start)",
        )
    return Check("database", OK, f"{where} at revision {state.head} (head)")


def check_queue(services: Services) -> Check:
    """Redis answers PING when GITOPS_REDIS_URL is set; embedded, the in-process queue is used."""
    if services.settings.redis_url is None:
        return Check("queue", OK, "GITOPS_REDIS_URL is unset: the in-process queue is used")
    try:
        services.redis.ping()
    except (RedisError, OSError, AttributeError) as exc:
        return Check(
            "queue",
            MISS,
            f"Redis does not answer PING ({type(exc).__name__})",
            "check GITOPS_REDIS_URL, that Redis runs and that this host reaches it",
        )
    return Check("queue", OK, "Redis answers PING")


def check_approval(services: Services) -> Check:
    """The approval system answers a status read (404 for a probe id is an answer)."""
    settings = services.settings
    if not settings.approval_url:
        return Check(
            "approval system", MISS, "GITOPS_APPROVAL_URL is not set", "set GITOPS_APPROVAL_URL"
        )
    client = services.require_clients().approval
    try:
        client.status(PROBE_ID)
    except ApprovalNotFound:
        pass
    except (ApprovalUnavailable, ApprovalCallFailed) as exc:
        return Check(
            "approval system",
            MISS,
            f"{settings.approval_url}: {exc}",
            "check GITOPS_APPROVAL_URL, that the approval system runs and that this host "
            "reaches it",
        )
    return Check("approval system", OK, f"{settings.approval_url} answers a status read")


def check_public_url(settings: Settings) -> Check:
    """The bot's public URL answers /healthz from here, where that can be checked at all."""
    name = "public URL"
    if settings.public_url == Settings.public_url:
        return Check(name, SKIPPED, "GITOPS_PUBLIC_URL is not set: this host's default is used")
    url = f"{settings.public_url}/healthz"
    status, error = http_status(url)
    if status is None:
        return Check(
            name,
            SKIPPED,
            f"{url} does not answer from here ({error}); the approval system and GitLab call "
            "it from their side: check from there",
        )
    if status != 200:
        return Check(
            name,
            MISS,
            f"{url} answered HTTP {status}",
            "route GITOPS_PUBLIC_URL's /healthz and /webhooks/* to the bot's web process",
        )
    return Check(name, OK, f"{url} answers 200")


def check_callbacks(settings: Settings) -> Check:
    """Completion callbacks need both an allow-list of receivers and the secret they verify."""
    name = "completion callbacks"
    hosts, secret = settings.callback_hosts, bool(settings.callback_secret)
    if not hosts and not secret:
        return Check(
            name, SKIPPED, "off: GITOPS_CALLBACK_HOSTS is not set (a callback_url is refused)"
        )
    if not secret:
        return Check(
            name,
            MISS,
            f"GITOPS_CALLBACK_HOSTS allows {len(hosts)} host(s) but GITOPS_CALLBACK_SECRET is not "
            "set: every callback_url is refused",
            "set GITOPS_CALLBACK_SECRET to the secret the receivers verify signatures with",
        )
    if not hosts:
        return Check(
            name,
            MISS,
            "GITOPS_CALLBACK_SECRET is set but GITOPS_CALLBACK_HOSTS allows no host: every "
            "callback_url is refused",
            "list the receivers' hosts in GITOPS_CALLBACK_HOSTS",
        )
    return Check(name, OK, f"allowed to {len(hosts)} host(s): {', '.join(hosts)}")


def check_deliveries(services: Services, now: datetime, database_ok: bool) -> Check:
    """No webhook delivery quarantined in the last day: each one is an event the bot took in
    (answered 2xx, so GitLab keeps the hook enabled) and never acted on."""
    name = "webhook deliveries"
    if not database_ok:
        return Check(name, SKIPPED, "the database does not answer")
    found = quarantined_since(services.engine, now - DELIVERIES_WINDOW)
    if not found.count:
        return Check(name, OK, "none quarantined in the last 24 h")
    return Check(
        name,
        MISS,
        f"{found.count} quarantined in the last 24 h; the newest ({found.source}): {found.reason}",
        "read the reason: a body over GITOPS_WEBHOOK_MAX_BODY_BYTES needs a larger limit, an "
        "unusable payload a look at what sent it; the events they carried were not acted on",
    )
