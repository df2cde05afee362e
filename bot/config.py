"""Settings, read once per process from the environment (never at import time)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.callbacks import parse_allowed
from bot.core.redact import mask_credentials

#: The embedded default's database when GITOPS_DATABASE_URL is unset.
EMBEDDED_DATABASE_URL = "sqlite:///gitops-bot.sqlite3"
#: The longest a completion callback may take, whatever GITOPS_GITLAB_TIMEOUT says (seconds).
CALLBACK_TIMEOUT_MAX = 5.0


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


def _optional_port(env: Mapping[str, str], key: str) -> int | None:
    """A TCP port, or None when the variable is unset or empty."""
    raw = env.get(key, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise ValueError(f"{key} must be a TCP port (1-65535), got {raw!r}")
    return int(raw)


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


#: GITOPS_LOG_FORMAT's values: one JSON object a line, or structlog's console lines.
LOG_FORMATS = ("json", "text")
#: The level names GITOPS_LOG_LEVEL and GITOPS_RQ_LOG_LEVEL take (any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _choice(env: Mapping[str, str], key: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(key, "").strip()
    if not raw:
        return default
    for choice in choices:
        if raw.casefold() == choice.casefold():
            return choice
    raise ValueError(f"{key} must be one of {', '.join(choices)}, got {raw!r}")


@dataclass(frozen=True)
class LogSettings:
    """How a process logs, read apart from the rest so that every command (even one whose
    other settings are wrong) can log its complaint."""

    #: "json" or "text"; None: text when stderr is a terminal, JSON lines otherwise
    format: str | None = None
    #: the level of the bot's own lines and everything else but RQ's
    level: str = "INFO"
    #: the level of RQ's and rq-scheduler's own lines (a few per job at INFO)
    rq_level: str = "WARNING"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LogSettings:
        """Reads GITOPS_LOG_FORMAT, GITOPS_LOG_LEVEL and GITOPS_RQ_LOG_LEVEL."""
        env = os.environ if env is None else env
        fmt = env.get("GITOPS_LOG_FORMAT", "").strip()
        return cls(
            format=_choice(env, "GITOPS_LOG_FORMAT", LOG_FORMATS, "") if fmt else None,
            level=_choice(env, "GITOPS_LOG_LEVEL", LOG_LEVELS, cls.level),
            rq_level=_choice(env, "GITOPS_RQ_LOG_LEVEL", LOG_LEVELS, cls.rq_level),
        )


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
    #: the branches changes may target (names or globs such as `release/*`); each must also be
    #: protected on GitLab; empty: only each project's default branch
    target_branches: tuple[str, ...] = ()
    #: the GitLab environments whose successful deployments of a merged change put it in
    #: effect (GITOPS_DEPLOY_ENVIRONMENTS, names); empty: those of GitLab's `production` tier
    #: (GitLab gives an environment named production, prod or live that tier by default), so a
    #: staging deployment never validates a change
    deploy_environments: tuple[str, ...] = ()
    #: how many of the approver accounts approve each change (None: every one of them); a
    #: repository's policy file may ask for more, never fewer
    approvals_required: int | None = None
    #: whether each managed repository's `.gitops/bot.yml` is read when a change starts (on by
    #: default: one GitLab read per change; off: the environment's settings apply to every
    #: project, and the file stays a protected path)
    policy_files: bool = True
    #: a request header set by a trusted proxy that lets a request into the dashboard
    #: (e.g. X-Forwarded-User); unset: the dashboard takes the API token only
    dashboard_header: str = ""
    #: the projects the bot manages (paths or numeric ids): when set, an allow-list enforced on
    #: API submissions and MR commands; always also the projects the hooks check looks at
    projects: tuple[str, ...] = ()
    port: int = 8000
    #: seconds between sweeps of operations past their deadline (and of expired step leases:
    #: a killed worker's change moves again within step_lease + sweep_interval = 50 s)
    sweep_interval: int = 20
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
    #: API bodies (and unauthenticated webhook bodies) larger than this are refused with 413
    max_body_bytes: int = 1_048_576
    #: the largest GitLab webhook body taken in (GITOPS_WEBHOOK_MAX_BODY_BYTES); an
    #: authenticated delivery over it is answered 2xx and quarantined with its size (GitLab
    #: disables a hook after four 4xx). GitLab allows MR descriptions of 1,048,576 characters
    #: (app/models/concerns/issuable.rb DESCRIPTION_LENGTH_MAX) and an edit's hook carries one
    #: three times (the MR's, `changes.description` previous and current); a character JSON
    #: escapes takes 6 bytes (`\u003c`), one outside the BMP 12 (a surrogate pair): 40 MiB
    #: holds the worst case, 3 x 12 MiB, and the rest of the payload
    webhook_max_body_bytes: int = 40 * 1_048_576
    #: times a stored delivery may fail processing before it is quarantined with its last error
    inbox_max_attempts: int = 5
    #: seconds a stored delivery is retried while GitLab or the approval system fails (their
    #: trouble spends no attempt) before it is quarantined with the last error
    inbox_transient_window: int = 6 * 3600
    #: failed tries of one outbox row (any failure) before it is dead: never tried again until
    #: an operator retries it; a refusal (4xx, an unexpected error) ends it after at most 8
    outbox_max_attempts: int = 30
    #: seconds during which one user gets at most one reply (refusal or help) per MR
    reply_window: int = 600
    #: seconds a client has to send a request's headers, and then its body: a stalled body is
    #: answered 408 and stalled headers close the connection, so a slow client frees its thread
    body_timeout: int = 10
    #: the hosts an API submitter's `callback_url` may name (`host`, `host:port`, optionally after
    #: `http://` to allow plain HTTP): compared exactly; empty: no callback is accepted
    callback_hosts: tuple[str, ...] = ()
    #: the key completion callbacks are signed with; unset: no callback is accepted
    callback_secret: str = field(default="", repr=False)
    #: GITOPS_LOG_FORMAT, GITOPS_LOG_LEVEL, GITOPS_RQ_LOG_LEVEL
    logs: LogSettings = field(default_factory=LogSettings)
    #: the port on which `gitops-bot worker` answers /metrics with what it counts (steps,
    #: deliveries, outbox sends, approval calls); unset: none (one port per worker process)
    worker_metrics_port: int | None = None
    # -- the dashboard's GitLab sign-in (webhooks/signin.py; API clients: bot/store/clients.py) --
    #: the GitLab OAuth application's id and secret (redirect URI `{public_url}/auth/callback`,
    #: scope `read_user`); both unset: no GitLab sign-in. The secret also keys the session
    #: cookie (through HMAC), so every web instance with it accepts the others' sessions
    oauth_client_id: str = ""
    oauth_client_secret: str = field(default="", repr=False)
    #: GitLab usernames let into the dashboard besides Reporters of GITOPS_PROJECTS' projects
    dashboard_users: tuple[str, ...] = ()

    def __repr__(self) -> str:
        """The settings without a secret: secret fields left out, URLs' credentials masked."""
        shown = []
        for name, spec in self.__dataclass_fields__.items():
            if not spec.repr:
                continue
            value = getattr(self, name)
            text = mask_credentials(value) if isinstance(value, str) else value
            shown.append(f"{name}={text!r}")
        return f"Settings({', '.join(shown)})"

    def secrets(self) -> tuple[str, ...]:
        """Every secret value configured (tokens, shared secrets, URL passwords): what is never
        printed (bot/core/redact.py `redact`)."""
        values = [
            self.gitlab_token,
            *self.approver_tokens,
            self.webhook_secret,
            self.approval_secret,
            self.deploy_secret,
            *self.deploy_secrets.values(),
            self.api_token,
            self.callback_secret,
        ]
        return tuple(v for v in values if v)

    @property
    def lease_seconds(self) -> int:
        """The lease a running step takes: GITOPS_STEP_LEASE, never longer than a step timeout."""
        return min(self.step_lease, self.step_timeout)

    @property
    def callback_timeout(self) -> float:
        """Seconds a completion callback may take: the GitLab timeout, at most 5."""
        return min(self.gitlab_timeout, CALLBACK_TIMEOUT_MAX)

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
            target_branches=_csv(env.get("GITOPS_TARGET_BRANCHES")),
            deploy_environments=_csv(env.get("GITOPS_DEPLOY_ENVIRONMENTS")),
            approvals_required=_approvals_required(env),
            policy_files=_choice(env, "GITOPS_POLICY_FILES", ("on", "off"), "on") == "on",
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
            webhook_max_body_bytes=_positive_int(
                env, "GITOPS_WEBHOOK_MAX_BODY_BYTES", cls.webhook_max_body_bytes, "bytes"
            ),
            body_timeout=body_timeout,
            outbox_max_attempts=_positive_int(
                env, "GITOPS_OUTBOX_MAX_ATTEMPTS", cls.outbox_max_attempts, "attempts"
            ),
            inbox_max_attempts=_positive_int(
                env, "GITOPS_INBOX_MAX_ATTEMPTS", cls.inbox_max_attempts, "attempts"
            ),
            inbox_transient_window=_positive_int(
                env, "GITOPS_INBOX_TRANSIENT_WINDOW", cls.inbox_transient_window
            ),
            reply_window=_positive_int(env, "GITOPS_REPLY_WINDOW", cls.reply_window),
            callback_hosts=_callback_hosts(env.get("GITOPS_CALLBACK_HOSTS")),
            callback_secret=env.get("GITOPS_CALLBACK_SECRET", ""),
            logs=LogSettings.from_env(env),
            worker_metrics_port=_optional_port(env, "GITOPS_WORKER_METRICS_PORT"),
            # -- the dashboard's GitLab sign-in --
            oauth_client_id=env.get("GITOPS_OAUTH_CLIENT_ID", "").strip(),
            oauth_client_secret=env.get("GITOPS_OAUTH_CLIENT_SECRET", "").strip(),
            dashboard_users=_csv(env.get("GITOPS_DASHBOARD_USERS")),
        )


def _approvals_required(env: Mapping[str, str]) -> int | None:
    """GITOPS_APPROVALS_REQUIRED: a positive count, at most the approver accounts; None unset."""
    if not env.get("GITOPS_APPROVALS_REQUIRED", "").strip():
        return None
    value = _positive_int(env, "GITOPS_APPROVALS_REQUIRED", 1, "approvals")
    accounts = len(_csv(env.get("GITOPS_APPROVER_TOKENS")))
    if value > accounts:
        raise ValueError(
            f"GITOPS_APPROVALS_REQUIRED ({value}) is more than the {accounts} approver accounts "
            "of GITOPS_APPROVER_TOKENS"
        )
    return value


def _callback_hosts(value: str | None) -> tuple[str, ...]:
    """GITOPS_CALLBACK_HOSTS's entries, each checked (ValueError naming a malformed one)."""
    entries = _csv(value)
    parse_allowed(entries)
    return entries


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
