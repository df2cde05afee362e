"""Settings, read once per process from the environment (never at import time)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: The embedded default's database when GITOPS_DATABASE_URL is unset.
EMBEDDED_DATABASE_URL = "sqlite:///gitops-bot.sqlite3"


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def _int(env: Mapping[str, str], key: str, default: int, unit: str = "seconds") -> int:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{key} must be an integer number of {unit}, got {raw!r}") from exc


def _secrets_by_project(value: str | None) -> dict[str, str]:
    """`group/app=secret,123=secret2` -> {project: secret}; a pair without `=` stops startup."""
    found: dict[str, str] = {}
    for part in _csv(value):
        project, sep, secret = part.partition("=")
        if not sep or not project.strip() or not secret:
            raise ValueError(
                "GITOPS_DEPLOY_SECRETS must be comma-separated project=secret pairs "
                "(project path or numeric id)"
            )
        found[project.strip().casefold()] = secret
    return found


def _positive_int(env: Mapping[str, str], key: str, default: int, unit: str = "seconds") -> int:
    value = _int(env, key, default, unit)
    if value <= 0:
        raise ValueError(f"{key} must be a positive integer number of {unit}, got {value}")
    return value


def _non_negative_int(env: Mapping[str, str], key: str, default: int) -> int:
    value = _int(env, key, default)
    if value < 0:
        raise ValueError(f"{key} must be zero or a positive integer number of seconds, got {value}")
    return value


def _positive_seconds(env: Mapping[str, str], key: str, default: float) -> float:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{key} must be a positive number of seconds, got {raw!r}")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything configurable; secrets are kept out of repr() so they never reach a log line."""

    database_url: str = EMBEDDED_DATABASE_URL
    #: None: the embedded in-process queue (fakeredis) instead of a Redis server
    redis_url: str | None = None
    gitlab_url: str = "https://gitlab.example.com"
    gitlab_token: str = field(default="", repr=False)
    approver_tokens: tuple[str, ...] = field(default=(), repr=False)
    #: seconds each GitLab call may take (connect and each read); slower is a timeout
    gitlab_timeout: float = 10.0
    webhook_secret: str = field(default="", repr=False)
    approval_url: str = ""
    approval_secret: str = field(default="", repr=False)
    deploy_secret: str = field(default="", repr=False)
    #: per-project deploy secrets (GITOPS_DEPLOY_SECRETS, `project=secret,...`): a project named
    #: here is validated only by a callback signed or tokened with its own secret; keys are
    #: casefolded project paths or numeric ids
    deploy_secrets: dict[str, str] = field(default_factory=dict, repr=False)
    api_token: str = field(default="", repr=False)
    public_url: str = "http://127.0.0.1:8000"
    allowed_paths: tuple[str, ...] = ()
    #: a request header set by a trusted proxy that lets a request into the dashboard
    #: (e.g. X-Forwarded-User); unset: the dashboard takes the API token only
    dashboard_header: str = ""
    #: the projects the bot manages (paths or numeric ids): when set, an allow-list enforced on
    #: API submissions and MR commands; always also the projects the hooks check looks at
    projects: tuple[str, ...] = ()
    port: int = 8000
    #: seconds between sweeps of operations past their deadline
    sweep_interval: int = 30
    #: seconds between outbox dispatches (status comments, labels, closes, withdrawals)
    outbox_interval: int = 5
    #: a running step (not a wait on people) past this is re-driven
    step_timeout: int = 600
    #: seconds of the lease a running step holds on its operation (at most step_timeout): the
    #: step renews it when a third has passed, before each GitLab or approval call and between
    #: steps; a worker killed mid-step leaves it to expire, and the next sweep re-drives the step
    step_lease: int = 30
    #: a check pipeline past this is reported pending ("you can keep waiting")
    pipeline_timeout: int = 3600
    #: a merged change without a deploy signal past this is reported pending ("deploy
    #: unconfirmed", step DEPLOY_PENDING); a late signal or reconciliation still validates it
    deploy_timeout: int = 3600
    reconcile_interval: int = 60
    reconcile_min_age: int = 120
    reconcile_max_age: int = 86400
    #: webhook and API bodies larger than this are refused with 413
    max_body_bytes: int = 1_048_576
    #: times a stored delivery may fail processing before it is quarantined with its last error
    inbox_max_attempts: int = 5
    #: seconds during which one user gets at most one reply (refusal or help) per MR
    reply_window: int = 600
    #: seconds a client has to send a request's headers, and then its body: a stalled body is
    #: answered 408 and stalled headers close the connection, so a slow client frees its thread
    body_timeout: int = 10

    @property
    def lease_seconds(self) -> int:
        """The lease a running step takes: GITOPS_STEP_LEASE, never longer than a step timeout."""
        return min(self.step_lease, self.step_timeout)

    @property
    def embedded(self) -> bool:
        """True when running with no servers: SQLite and the in-process queue."""
        return self.database_url.startswith("sqlite") and self.redis_url is None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Reads GITOPS_* (and PORT) once; unset database and Redis mean the embedded default."""
        env = os.environ if env is None else env
        database_url = env.get("GITOPS_DATABASE_URL", "").strip() or EMBEDDED_DATABASE_URL
        body_timeout = _int(env, "GITOPS_BODY_TIMEOUT", cls.body_timeout)
        if body_timeout < 1:
            raise ValueError(f"GITOPS_BODY_TIMEOUT must be at least 1 second, got {body_timeout}")
        gitlab_timeout = _positive_seconds(env, "GITOPS_GITLAB_TIMEOUT", cls.gitlab_timeout)
        step_lease = _positive_int(env, "GITOPS_STEP_LEASE", cls.step_lease)
        if gitlab_timeout * 3 > step_lease * 2:
            # a beat leaves at least two thirds of the lease: one call must fit in it
            raise ValueError(
                f"GITOPS_GITLAB_TIMEOUT ({gitlab_timeout:g}) must be at most two thirds of "
                f"GITOPS_STEP_LEASE ({step_lease}), so a running step renews its lease in time"
            )
        return cls(
            database_url=normalise_database_url(database_url),
            redis_url=env.get("GITOPS_REDIS_URL", "").strip() or None,
            gitlab_url=env.get("GITOPS_GITLAB_URL", cls.gitlab_url).rstrip("/"),
            gitlab_token=env.get("GITOPS_GITLAB_TOKEN", ""),
            approver_tokens=_csv(env.get("GITOPS_APPROVER_TOKENS")),
            gitlab_timeout=gitlab_timeout,
            webhook_secret=env.get("GITOPS_WEBHOOK_SECRET", ""),
            approval_url=env.get("GITOPS_APPROVAL_URL", "").rstrip("/"),
            approval_secret=env.get("GITOPS_APPROVAL_SECRET", ""),
            deploy_secret=env.get("GITOPS_DEPLOY_SECRET", ""),
            deploy_secrets=_secrets_by_project(env.get("GITOPS_DEPLOY_SECRETS")),
            api_token=env.get("GITOPS_API_TOKEN", ""),
            public_url=env.get("GITOPS_PUBLIC_URL", cls.public_url).rstrip("/"),
            allowed_paths=_csv(env.get("GITOPS_ALLOWED_PATHS")),
            dashboard_header=env.get("GITOPS_DASHBOARD_HEADER", "").strip(),
            projects=_csv(env.get("GITOPS_PROJECTS")),
            port=_int(env, "PORT", cls.port),
            sweep_interval=_positive_int(env, "GITOPS_SWEEP_INTERVAL", cls.sweep_interval),
            outbox_interval=_positive_int(env, "GITOPS_OUTBOX_INTERVAL", cls.outbox_interval),
            step_timeout=_positive_int(env, "GITOPS_STEP_TIMEOUT", cls.step_timeout),
            step_lease=step_lease,
            pipeline_timeout=_positive_int(env, "GITOPS_PIPELINE_TIMEOUT", cls.pipeline_timeout),
            deploy_timeout=_positive_int(env, "GITOPS_DEPLOY_TIMEOUT", cls.deploy_timeout),
            reconcile_interval=_positive_int(
                env, "GITOPS_RECONCILE_INTERVAL", cls.reconcile_interval
            ),
            reconcile_min_age=_non_negative_int(
                env, "GITOPS_RECONCILE_MIN_AGE", cls.reconcile_min_age
            ),
            reconcile_max_age=_positive_int(env, "GITOPS_RECONCILE_MAX_AGE", cls.reconcile_max_age),
            max_body_bytes=_positive_int(env, "GITOPS_MAX_BODY_BYTES", cls.max_body_bytes, "bytes"),
            body_timeout=body_timeout,
            inbox_max_attempts=_positive_int(
                env, "GITOPS_INBOX_MAX_ATTEMPTS", cls.inbox_max_attempts, "attempts"
            ),
            reply_window=_positive_int(env, "GITOPS_REPLY_WINDOW", cls.reply_window),
        )


def normalise_database_url(url: str) -> str:
    """Picks psycopg 3 for bare postgres URLs and makes relative SQLite paths absolute."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        rest = url[len("sqlite:///") :]
        if rest and rest != ":memory:":
            return "sqlite:///" + str(Path(rest).resolve())
    return url
