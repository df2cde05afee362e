"""`gitops-bot doctor`: the whole configuration checked against the real services.

Each check is a small function returning a `Check` (name, ok/miss/skipped, what was found, the
fix for a miss). A check that cannot be made because an earlier one failed (a project's hooks
when the author token is not valid) is skipped, not missed, so one fault shows as one miss.
Nothing here writes anywhere: every call is a read (GET) or a database query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from redis.exceptions import RedisError

from bot.app.hooks import EVENTS, receiver_url
from bot.approval import ApprovalCallFailed, ApprovalNotFound, ApprovalUnavailable
from bot.approval.reach import http_status
from bot.config import Settings
from bot.gitlab import (
    Account,
    GitLabError,
    Unauthorized,
    default_branch,
    list_hooks,
    member_access_level,
    server_version,
    token_scopes,
)
from bot.gitlab.protection import (
    BOT_BRANCHES,
    MAINTAINERS,
    author_identity,
    judge,
    list_protection,
    merge_right,
    read_protection,
)
from bot.services import Services
from bot.store.health import schema_state
from bot.store.hooks import named_targets

OK, MISS, SKIPPED = "ok", "miss", "skipped"
#: GitLab's access levels by number, as its settings pages name them
LEVELS = {10: "Guest", 20: "Reporter", 30: "Developer", 40: "Maintainer", 50: "Owner"}
#: Pushing a branch, opening an MR (the author) and approving one (an approver) need Developer.
DEVELOPER = 30
#: The token scope every bot account needs: the REST API, read and write.
SCOPE = "api"
#: An approval id no approval system hands out: its status read shows the system answers.
PROBE_ID = "gitops-bot-doctor-probe"


@dataclass(frozen=True)
class Check:
    """One line of the checklist."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def as_json(self) -> dict[str, str]:
        """The check for scripts."""
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class Identity:
    """A bot account whose token GitLab accepted."""

    label: str
    account: Account
    user_id: int
    username: str


def _where(label: str) -> str:
    """The variable holding an account's token."""
    if label == "author":
        return "GITOPS_GITLAB_TOKEN"
    return f"GITOPS_APPROVER_TOKENS (entry {label.removeprefix('approver-')})"


# -- the checks -----------------------------------------------------------------------------------


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


def check_gitlab(settings: Settings, author: Account) -> Check:
    """GitLab answers GET /version (a 401 still shows it is there: the token checks say more)."""
    try:
        version = server_version(author)
    except Unauthorized:
        return Check("gitlab", OK, f"{settings.gitlab_url} answers (401 to this token)")
    except GitLabError as exc:
        if exc.status_code is not None and exc.status_code < 500:
            return Check("gitlab", OK, f"{settings.gitlab_url} answers ({exc.status_code})")
        return Check(
            "gitlab",
            MISS,
            f"{settings.gitlab_url} does not answer: {exc}",
            "check GITOPS_GITLAB_URL (the instance's base URL, without /api/v4) and the network",
        )
    return Check("gitlab", OK, f"{settings.gitlab_url}, GitLab {version}")


def check_token(label: str, account: Account, token: str) -> tuple[Check, Identity | None]:
    """The token is valid (GET /user) and has the `api` scope where GitLab shows scopes."""
    name = f"token {label}"
    where = _where(label)
    if not token:
        return Check(name, MISS, f"{where} is not set", f"set {where}"), None
    try:
        user_id, username = author_identity(account)
    except GitLabError as exc:
        return Check(
            name,
            MISS,
            f"GitLab does not accept the token: {exc}",
            f"create a personal access token with scope `{SCOPE}` for the {label} account "
            f"and set it in {where}",
        ), None
    who = Identity(label, account, user_id, username)
    try:
        scopes = token_scopes(account)
    except GitLabError as exc:
        return Check(name, MISS, f"@{username}: cannot read the token's scopes: {exc}"), who
    if scopes is None:
        detail = f"@{username} (#{user_id}); GitLab does not show this token's scopes"
        return Check(name, OK, detail), who
    if SCOPE not in scopes:
        return Check(
            name,
            MISS,
            f"@{username}: the token's scopes are {', '.join(scopes) or '(none)'}, not `{SCOPE}`",
            f"create a token with scope `{SCOPE}` for @{username} and set it in {where}",
        ), who
    return Check(name, OK, f"@{username} (#{user_id}), scopes {', '.join(scopes)}"), who


def check_distinct(identities: Sequence[Identity]) -> Check:
    """The author and each approver are different GitLab users."""
    if not identities:
        return Check("distinct users", SKIPPED, "no valid token to compare")
    seen: dict[int, str] = {}
    clashes = []
    for who in identities:
        if who.user_id in seen:
            clashes.append(f"{who.label} is @{who.username}, as {seen[who.user_id]} is")
        else:
            seen[who.user_id] = who.label
    if clashes:
        return Check(
            "distinct users",
            MISS,
            "; ".join(clashes),
            "give each account its own GitLab user: GitLab counts one approval per user, and "
            "an MR's author approving it does not count",
        )
    names = ", ".join(f"{who.label} @{who.username}" for who in identities)
    return Check("distinct users", OK, names)


def _level(level: int | None) -> str:
    return "no access" if level is None else f"{LEVELS.get(level, 'level')} ({level})"


@dataclass(frozen=True)
class Membership:
    """An account's access level on a project, read through its own token."""

    who: Identity
    #: None: not a member
    level: int | None
    #: why the read failed (then `level` says nothing)
    error: str | None = None

    @property
    def developer(self) -> bool:
        """At least Developer: may push, open MRs, approve."""
        return self.error is None and (self.level or 0) >= DEVELOPER

    @property
    def text(self) -> str:
        """`author @gitops-bot Maintainer (40)`."""
        found = self.error or _level(self.level)
        return f"{self.who.label} @{self.who.username} {found}"


def read_membership(project: str, who: Identity) -> Membership:
    """The account's effective access level on the project (one GET through its token)."""
    try:
        return Membership(who, member_access_level(who.account.project(project), who.user_id))
    except GitLabError as exc:
        return Membership(who, None, str(exc))


def check_access(project: str, author: Membership | None) -> Check:
    """The author account is at least Developer on the project (it pushes and opens MRs)."""
    name = f"access {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the membership with")
    if author.error is not None:
        return Check(name, MISS, author.text, _access_fix(project))
    if not author.developer:
        return Check(
            name,
            MISS,
            author.text,
            f"make @{author.who.username} Developer or more on {project} (Project information "
            "> Members): the author pushes branches and opens MRs",
        )
    return Check(name, OK, author.text)


def check_merge(project: str, author: Membership | None, branches: Sequence[str]) -> Check:
    """The author may merge into each branch it will merge to there (the project's default
    branch and those requests name): GitLab's protected branches (merge or push allowed to its
    user or to a role it has) against its access level."""
    name = f"merge {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the protected branches with")
    if not author.developer:
        return Check(name, SKIPPED, f"@{author.who.username} is not Developer: see access")
    who = author.who
    gitlab_project = who.account.project(project)
    try:
        default = default_branch(gitlab_project)
        rules = list_protection(gitlab_project)
    except GitLabError as exc:
        return Check(
            name,
            MISS,
            f"cannot read the protected branches as @{who.username}: {exc}",
            _access_fix(project),
        )
    targets = sorted({*([default] if default else []), *branches})
    if not targets:
        return Check(name, SKIPPED, "no target branch: the repository is empty, none requested")
    rights = {branch: merge_right(rules, branch, who.user_id, author.level) for branch in targets}
    detail = "; ".join(right.text for right in rights.values())
    refused = [branch for branch, right in rights.items() if right.verdict == "no"]
    if refused:
        return Check(
            name,
            MISS,
            f"@{who.username}, {_level(author.level)}, may not merge into "
            f"{', '.join(refused)}: {detail}",
            f"let @{who.username} merge into {', '.join(refused)} on {project}: add it (or a "
            'role it has) to the rule\'s "Allowed to merge" (Settings > Repository > Protected '
            "branches), or make it Maintainer where Maintainers may merge",
        )
    if any(right.verdict == "unknown" for right in rights.values()):
        return Check(
            name, SKIPPED, f"only a group may let @{who.username} merge (not read): {detail}"
        )
    return Check(name, OK, f"@{who.username} may merge: {detail}")


def check_approve(project: str, approvers: Sequence[Membership], author: Identity | None) -> Check:
    """Each approver can approve the author's MRs there: at least Developer, and not the author
    account (an MR's author approving it does not count)."""
    name = f"approve {project}"
    if not approvers:
        return Check(name, SKIPPED, "no valid approver token to read memberships with")
    clashes = [m for m in approvers if author is not None and m.who.user_id == author.user_id]
    judged = [m for m in approvers if m not in clashes]
    found = [m.text for m in judged] + [
        f"{m.who.label} is the author account (see distinct users)" for m in clashes
    ]
    errors = [m for m in judged if m.error is not None]
    if errors:
        return Check(name, MISS, "; ".join(found), _access_fix(project))
    short = [f"@{m.who.username}" for m in judged if not m.developer]
    if short:
        return Check(
            name,
            MISS,
            "; ".join(found),
            f"make {', '.join(short)} Developer or more on {project} (Project information > "
            "Members): approvers approve the author's MRs",
        )
    if clashes:  # distinct users misses for it: one fault, one miss
        return Check(name, SKIPPED, "; ".join(found))
    return Check(name, OK, "; ".join(found))


def _access_fix(project: str) -> str:
    return f"check that {project} exists and that each bot account is a member of it"


def check_hook(author: Identity | None, project: str, url: str, now: datetime) -> Check:
    """The project has a hook to the bot's receiver, enabled, with the four events."""
    name = f"hook {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the hooks with")
    install = f"gitops-bot hooks install {project}"
    try:
        hooks = list_hooks(author.account.project(project))
    except GitLabError as exc:
        return Check(
            name,
            MISS,
            f"cannot list the hooks as @{author.username}: {exc}",
            f"make @{author.username} Maintainer on {project} (listing hooks needs it), "
            f"then `{install}`",
        )
    ours = [hook for hook in hooks if hook.url.rstrip("/") == url]
    if not ours:
        return Check(name, MISS, f"no hook to {url}", install)
    hook = ours[0]
    if hook.disabled(now):
        return Check(
            name,
            MISS,
            f"GitLab stopped sending to hook #{hook.id} ({hook.alert_status or 'disabled'})",
            "fix the receiver, then send a test event from the project's webhook settings "
            "(GitLab re-enables a hook after a successful test)",
        )
    lacking = [event for event in EVENTS if event not in hook.events]
    if lacking:
        return Check(
            name,
            MISS,
            f"hook #{hook.id} to {url} lacks {', '.join(lacking)}",
            f"{install} (sets the events)",
        )
    return Check(name, OK, f"hook #{hook.id} to {url}, enabled, {', '.join(EVENTS)}")


def check_protection(author: Identity | None, project: str) -> Check:
    """`gitops/*` is protected as `gitops-bot hooks install` sets it (protection.judge)."""
    name = f"protection {project}"
    if author is None:
        return Check(name, SKIPPED, "no valid author token to read the rule with")
    try:
        verdict = judge(read_protection(author.account.project(project)), author.user_id)
    except GitLabError as exc:
        return Check(name, MISS, f"cannot read {BOT_BRANCHES}: {exc}", _access_fix(project))
    if not verdict.ok:
        return Check(
            name,
            MISS,
            f"{BOT_BRANCHES}: {verdict.text}",
            f"gitops-bot hooks install {project}",
        )
    if verdict.mode == MAINTAINERS:
        detail = f"{BOT_BRANCHES}: Maintainers push and merge (the CE fallback)"
        return Check(name, OK, detail)
    return Check(name, OK, f"{BOT_BRANCHES}: only @{author.username} pushes and merges")


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


# -- the run --------------------------------------------------------------------------------------


def targets_of(services: Services, database_ok: bool) -> dict[str, list[str]]:
    """GITOPS_PROJECTS, and the projects requests name when the database can be read, each
    with the target branches its requests name."""
    named = named_targets(services.engine) if database_ok else {}
    return {
        project: named.get(project, []) for project in sorted({*services.settings.projects, *named})
    }


def run(services: Services, now: datetime) -> list[Check]:
    """Every check, in the order a setup is done."""
    settings = services.settings
    clients = services.require_clients()
    database = check_database(services)
    checks = [database, check_queue(services), check_gitlab(settings, clients.author)]
    identities: list[Identity] = []
    accounts = [(clients.author, settings.gitlab_token)]
    accounts += list(zip(clients.approvers, settings.approver_tokens, strict=True))
    gitlab_ok = checks[-1].status == OK
    for account, token in accounts:
        if not gitlab_ok:
            checks.append(Check(f"token {account.label}", SKIPPED, "GitLab does not answer"))
            continue
        check, who = check_token(account.label, account, token)
        checks.append(check)
        if who is not None:
            identities.append(who)
    if not settings.approver_tokens:
        checks.append(
            Check(
                "token approvers",
                MISS,
                "GITOPS_APPROVER_TOKENS is not set",
                "set GITOPS_APPROVER_TOKENS to the approval bots' tokens",
            )
        )
    checks.append(check_distinct(identities))
    author = next((who for who in identities if who.label == "author"), None)
    targets = targets_of(services, database.status == OK)
    if not targets:
        checks.append(
            Check(
                "projects",
                SKIPPED,
                "no managed projects: none in GITOPS_PROJECTS, none named by a request",
            )
        )
    url = receiver_url(settings).rstrip("/")
    for project, branches in targets.items():
        memberships = [read_membership(project, who) for who in identities]
        author_access = next((m for m in memberships if m.who is author), None)
        checks.append(check_access(project, author_access))
        checks.append(check_merge(project, author_access, branches))
        checks.append(
            check_approve(project, [m for m in memberships if m.who is not author], author)
        )
        checks.append(check_hook(author, project, url, now))
        checks.append(check_protection(author, project))
    checks.append(check_approval(services))
    checks.append(check_public_url(settings))
    checks.append(check_callbacks(settings))
    return checks


def misses(checks: Sequence[Check]) -> list[Check]:
    """The checks that failed (the command exits 1 when there is one)."""
    return [check for check in checks if check.status == MISS]
