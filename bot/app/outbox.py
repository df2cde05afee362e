"""The outbox dispatcher: claims due rows, performs their effects after commit, marks them sent.

A short transaction claims due rows by pushing their `next_attempt_at` forward by a lease
(bot/store/outbox.py: `FOR UPDATE SKIP LOCKED` on PostgreSQL, so two dispatchers never take the
same row). The effects then run with no transaction open, through adapters that are safe to
repeat: the status comment is found again by its marker and edited in place, labels are added
and removed in one call, closing a closed MR and withdrawing a withdrawn approval are no-ops. A
dispatcher that dies mid-way loses nothing: its rows come back when the lease runs out.

Per operation and dispatch there is at most one status-comment write and one labels call,
however many rows of that effect are due: both render the operation's current state, so a burst
of transitions becomes one edit (GitLab allows few note writes a minute).

Completion callbacks are the exception: each row tells of its own phase change, so an
operation's callback rows are never coalesced; they go one at a time, oldest first (the claim
takes only the oldest unsent one of an operation), and a failed one holds back the later ones,
so a receiver gets an operation's phases in order (bot/app/callbacks.py).

A row's stored kind is parsed into `Effect` once; a kind this version does not know is a
permanent failure of that row (dead at once, counted, never performed as anything else). Every
known effect has its handler, chosen by an exhaustive `match`.

Every row's tries are bounded: a row whose effect failed GITOPS_OUTBOX_MAX_ATTEMPTS times (any
failure; 30 by default, about two hours of back-off) or was refused REFUSALS_MAX times (a 4xx,
an unexpected error: something that will not mend by waiting) is dead: kept with its last error,
counted (`gitops_outbox_dead_total` when it dies, the `gitops_outbox_dead_rows` gauge while it
waits), shown on the dashboard and never claimed again, until an operator retries or drops it
(`gitops-bot outbox retry|drop`, bot/store/outbox.py), or a newer row of the same operation and
effect is sent (which made it moot: marked sent, "superseded"). A put-off (GitLab asked for a
pause) costs no attempt.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import assert_never

from prometheus_client import Counter

from bot import logs, metrics
from bot.app.callbacks import deliver
from bot.approval.backoff import backoff
from bot.core.labels import label_change
from bot.core.states import BindingState
from bot.core.table import Effect
from bot.errors import CannotProceed, TransientError
from bot.gitlab import (
    GitLabUnavailable,
    Project,
    branch_name,
    close_mr,
    delete_branch,
    set_labels,
    unapprove,
    upsert_status_note,
)
from bot.gitlab.errors import Forbidden, GitLabRefused, scrub
from bot.render.status import StatusView, load_status, render_status
from bot.services import Clients, Services
from bot.store.operations import label_set, touch
from bot.store.outbox import (
    LEASE,
    Claimed,
    back_off,
    callback_targets,
    claim,
    defer,
    mark_sent,
    settle_dead,
)

log = logging.getLogger(__name__)

#: A dispatch starts no new operation after this much of the lease is used up (real time), so
#: its rows are done before another dispatcher may take them again.
WORK_BUDGET_SECONDS = LEASE.total_seconds() / 2
#: Refusals (deterministic failures) of one row before it is dead, however many tries
#: GITOPS_OUTBOX_MAX_ATTEMPTS allows.
REFUSALS_MAX = 8
#: Longest `last_error` kept.
ERROR_LIMIT = 300

SENT_TOTAL = Counter(
    "gitops_outbox_sent_total", "Outbox rows marked sent (performed or coalesced).", ["effect"]
)
FAILURES_TOTAL = Counter(
    "gitops_outbox_failures_total",
    "Outbox rows whose effect failed and was backed off.",
    ["effect"],
)
DEAD_TOTAL = Counter(
    "gitops_outbox_dead_total",
    "Outbox rows that failed for good (GITOPS_OUTBOX_MAX_ATTEMPTS tries, "
    f"{REFUSALS_MAX} refusals or an unknown kind), counted when they die.",
    ["effect"],
)

#: The metrics' `effect` label of rows whose stored kind is not an `Effect`.
UNKNOWN = "unknown"

#: The order an operation's effects run in (the comment last, so it shows the others done).
ORDER: tuple[Effect, ...] = (
    Effect.UNAPPROVE,
    Effect.WITHDRAW_APPROVAL,
    Effect.CLOSE_MR,
    Effect.LABELS,
    Effect.STATUS_COMMENT,
    Effect.CALLBACK,
    Effect.DELETE_BRANCH,
)
#: Effects that call GitLab (paused for the rest of a dispatch once GitLab is unavailable).
GITLAB_EFFECTS = frozenset(
    {
        Effect.STATUS_COMMENT,
        Effect.LABELS,
        Effect.CLOSE_MR,
        Effect.UNAPPROVE,
        Effect.DELETE_BRANCH,
    }
)
_CLOSING = frozenset({BindingState.REJECTED, BindingState.CLOSED})
#: The note of a row whose effect needs the MR, for an operation with none yet.
NO_MR = "skipped: no MR yet"
#: `status_note_hash` while an operation's first status comment is being posted.
POSTING = "posting"


@dataclass
class DispatchReport:
    """What one dispatch did, in outbox rows."""

    #: rows claimed
    claimed: int = 0
    #: rows marked sent (performed, coalesced into another row's call, or nothing to do)
    sent: int = 0
    #: rows whose effect failed and were backed off (dead ones included)
    failed: int = 0
    #: rows marked sent without a call of their own (another row of the same effect made it)
    coalesced: int = 0
    #: rows that died in this dispatch (tries or refusals used up, unknown kinds)
    dead: int = 0
    #: dead rows marked sent because a newer row of their operation and effect was sent
    settled: int = 0
    #: rows whose stored kind is not an `Effect` (failed, nothing performed)
    unknown: int = 0
    #: rows put off without an attempt: GitLab was unavailable earlier in this dispatch
    deferred: int = 0
    #: rows left to their lease because the dispatch ran out of time
    released: int = 0


def parse_effect(kind: str) -> Effect | None:
    """The effect a row's stored kind names; None for a kind this version does not know."""
    try:
        return Effect(kind)
    except ValueError:
        return None


def run_dispatch(services: Services, limit: int, now: datetime) -> DispatchReport:
    """One dispatch over these services at `now`."""
    rows = claim(services.engine, limit, now)
    run = _Dispatch(services, now, DispatchReport(len(rows)))
    by_operation: dict[str, list[Claimed]] = {}
    for row in rows:
        by_operation.setdefault(row.operation_id, []).append(row)
    stop_at = time.monotonic() + WORK_BUDGET_SECONDS
    for operation_id, op_rows in by_operation.items():
        if time.monotonic() > stop_at:
            run.report.released += len(op_rows)
            continue
        try:
            with logs.scope(operation_id=operation_id):
                run.operation(operation_id, op_rows)
        except Exception:
            # marking failed (the database went away?): the rows come back when the lease ends
            log.exception("outbox: operation not dispatched", extra={"operation_id": operation_id})
            run.report.failed += len(op_rows)
    return run.report


class _Dispatch:
    """One dispatch's state: its clock, what it did, and whether GitLab is being left alone."""

    def __init__(self, services: Services, now: datetime, report: DispatchReport):
        self.engine = services.engine
        self.public_url = services.settings.public_url
        #: GITOPS_POLICY_FILES: off, the status says so instead of "the branch has no file"
        self.policy_files = services.settings.policy_files
        self.max_attempts = services.settings.outbox_max_attempts
        #: asked for clients only by an effect that calls out
        self._services = services
        self.now = now
        self.report = report
        #: GitLab said "not now": its effects wait until then, without costing an attempt
        self.gitlab_paused_until: datetime | None = None

    def operation(self, operation_id: str, rows: list[Claimed]) -> None:
        """Performs one operation's claimed rows; nothing raised here stops the other operations."""
        try:
            view = load_status(self.engine, operation_id)
        except Exception as exc:
            log.exception("outbox: cannot read the operation", extra={"operation_id": operation_id})
            self._failed(rows, exc, deterministic=False)
            return
        if view is None:
            self._sent(rows, "skipped: the operation is gone")
            return
        logs.bind(project=view.project, mr_iid=view.mr_iid)
        groups: dict[Effect, list[Claimed]] = {}
        unknown: dict[str, list[Claimed]] = {}
        for row in rows:
            effect = parse_effect(row.effect)
            if effect is None:
                unknown.setdefault(row.effect, []).append(row)
            else:
                groups.setdefault(effect, []).append(row)
        for kind, unknown_rows in unknown.items():
            self._unknown(kind, unknown_rows)
        for effect in sorted(groups, key=lambda e: ORDER.index(e) if e in ORDER else len(ORDER)):
            if effect is Effect.CALLBACK:
                self._callbacks(view, groups[effect])
            else:
                self._effect(view, effect, groups[effect])

    def _callbacks(self, view: StatusView, rows: list[Claimed]) -> None:
        """Callback rows one by one, oldest first (each tells of its own phase change); a
        failure puts the later ones off, so a receiver gets the phases in order."""
        for i, row in enumerate(rows):
            if not self._effect(view, Effect.CALLBACK, [row]):
                if rest := rows[i + 1 :]:
                    defer(self.engine, rest, self.now, "deferred: an earlier callback failed")
                    self.report.deferred += len(rest)
                return

    def _unknown(self, kind: str, rows: Sequence[Claimed]) -> None:
        """Rows of a kind that is no `Effect`: nothing is performed; dead at once, counted.

        A newer version may have written them: once it runs again, an operator retries them.
        """
        error = _cap(scrub(f"dead: unknown outbox effect {kind!r}"))
        back_off(self.engine, rows, self.now, error, dead_at=self.now)
        self.report.failed += len(rows)
        self.report.unknown += len(rows)
        self.report.dead += len(rows)
        FAILURES_TOTAL.labels(UNKNOWN).inc(len(rows))
        DEAD_TOTAL.labels(UNKNOWN).inc(len(rows))
        log.error(
            "outbox: unknown effect %r, not performed",
            kind,
            extra={"operation_id": rows[0].operation_id, "effect": UNKNOWN},
        )

    def _effect(self, view: StatusView, effect: Effect, rows: list[Claimed]) -> bool:
        """One effect for one operation, once for all its rows; marks them by the outcome;
        whether it was done."""
        extra = {"operation_id": view.operation_id, "effect": effect}
        logs.bind(step=f"outbox:{effect.value}")
        if effect in GITLAB_EFFECTS and self.gitlab_paused_until is not None:
            self._defer(rows, self.gitlab_paused_until)
            return False
        try:
            note = self._perform(view, effect, rows)
        except TransientError as exc:
            log.warning("outbox: %s failed, will retry: %s", effect, exc, extra=extra)
            retry_after = getattr(exc, "retry_after", None)
            until = self._failed(rows, exc, deterministic=False, retry_after=retry_after)
            if isinstance(exc, GitLabUnavailable):
                self.gitlab_paused_until = until
        except CannotProceed as exc:
            log.warning("outbox: %s refused: %s", effect, exc, extra=extra)
            self._failed(rows, exc, deterministic=True)
        except Exception as exc:
            log.exception("outbox: %s failed unexpectedly", effect, extra=extra)
            self._failed(rows, exc, deterministic=True)
        else:
            self._sent(rows, note, performed=note is None)
            return True
        return False

    def _perform(self, view: StatusView, effect: Effect, rows: list[Claimed]) -> str | None:
        """Performs `effect` for the operation as it is now; a note when there was nothing to do."""
        match effect:
            case Effect.STATUS_COMMENT:
                return self._status_comment(view)
            case Effect.LABELS:
                return self._labels(view)
            case Effect.CLOSE_MR:
                return self._close_mr(view)
            case Effect.WITHDRAW_APPROVAL:
                return self._withdraw_approval(view)
            case Effect.UNAPPROVE:
                return self._unapprove(view)
            case Effect.CALLBACK:
                return self._callback(view, rows[0])
            case Effect.DELETE_BRANCH:
                return self._delete_branch(view)
            case _:
                assert_never(effect)

    def _status_comment(self, view: StatusView) -> str | None:
        """The MR's one status comment says the operation's current state."""
        if view.mr_iid is None:
            return NO_MR
        body = render_status(view, self.public_url, policy_files=self.policy_files)
        digest = hashlib.sha256(body.encode()).hexdigest()
        if view.status_note_id is not None and digest == view.status_note_hash:
            return "unchanged"  # the comment already says this: no call at all
        first = view.status_note_id is None and view.status_note_hash is None
        if first:
            # recorded before the POST: after a crash between the POST and the record below,
            # the next try looks for the comment by its marker instead of posting another
            touch(self.engine, view.operation_id, status_note_hash=POSTING)
        note_id = upsert_status_note(
            self._project(view),
            view.mr_iid,
            view.operation_id,
            body,
            note_id=view.status_note_id,
            first=first,
        )
        touch(self.engine, view.operation_id, status_note_id=note_id, status_note_hash=digest)
        return None

    def _labels(self, view: StatusView) -> str | None:
        """The MR's one gitops:: label is the operation's phase; set only when it changes (the
        label the outbox set last is kept on the operation; `/gitops status` forgets it)."""
        if view.mr_iid is None:
            return NO_MR
        if not view.owns_binding:
            # a newer request for the same subject and target owns the MR's label now
            return "skipped: superseded by a newer request"
        add, remove = label_change(view.phase)
        if label_set(self.engine, view.operation_id) == add[0]:
            return "unchanged: the MR has its phase's label already"
        set_labels(self._project(view), view.mr_iid, add, remove)
        touch(self.engine, view.operation_id, label_set=add[0])
        return None

    def _close_mr(self, view: StatusView) -> str | None:
        """The bot's MR of a rejected or closed request is closed."""
        if view.mr_iid is None:
            return NO_MR
        # checked again at send time: a person's MR is never closed by the bot
        if not view.mr_opened_by_bot:
            return "skipped: not the bot's MR"
        if view.phase not in _CLOSING:
            return f"skipped: the request is {view.phase.value}, not closed"
        close_mr(self._project(view), view.mr_iid)
        return None

    def _withdraw_approval(self, view: StatusView) -> str | None:
        """The approval system drops the operation's approval request."""
        if view.approval_id is None:
            return "skipped: no approval request"
        self._clients().approval.withdraw(view.approval_id)
        return None

    def _unapprove(self, view: StatusView) -> str | None:
        """The approver accounts take back their approvals (the content changed after approval)."""
        if view.mr_iid is None:
            return NO_MR
        # GitLab's own rules must not count our approvals
        unapprove(self._clients().approvers, self._project(view), view.mr_iid)
        return None

    def _delete_branch(self, view: StatusView) -> str | None:
        """The bot's merged branch is deleted by its author account. GitLab keeps a protected
        source branch on merge, and only a Maintainer may delete one (400 otherwise): then the
        branch is kept, said here and by `gitops-bot doctor` ("delete merged branches")."""
        if not view.mr_opened_by_bot:
            return "skipped: not the bot's MR"
        branch = branch_name(view.operation_id)
        try:
            gone = delete_branch(self._project(view), branch)
        except (GitLabRefused, Forbidden) as exc:
            log.warning("merged branch kept: %s", exc, extra={"operation_id": view.operation_id})
            return f"kept {branch}: the author account may not delete it ({exc.status_code})"
        return None if gone else "already deleted"

    def _callback(self, view: StatusView, row: Claimed) -> str | None:
        """The submitter's callback_url is told of the row's phase change (bot/app/callbacks.py)."""
        target = callback_targets(self.engine, [view.operation_id]).get(view.operation_id)
        return deliver(self._services.settings, view, target, row, self.now)

    def _project(self, view: StatusView) -> Project:
        return self._clients().author.project(view.gitlab_project)

    def _clients(self) -> Clients:
        return self._services.require_clients()

    def _sent(self, rows: Sequence[Claimed], note: str | None, *, performed: bool = False) -> None:
        mark_sent(self.engine, rows, self.now, note)
        # an older dead row of this effect asked for what was just done (or found moot)
        newest = rows[-1]
        self.report.settled += settle_dead(
            self.engine, newest.operation_id, newest.effect, self.now, newest.id
        )
        self.report.sent += len(rows)
        if performed:
            self.report.coalesced += len(rows) - 1
        SENT_TOTAL.labels(rows[0].effect).inc(len(rows))
        if performed and rows[0].effect == Effect.CALLBACK:
            metrics.CALLBACKS_TOTAL.labels("sent").inc(len(rows))

    def _failed(
        self,
        rows: Sequence[Claimed],
        exc: BaseException,
        *,
        deterministic: bool,
        retry_after: float | None = None,
    ) -> datetime:
        """Backs the rows off, or ends them dead when this was their last try; their next time.

        The rows of one effect share a call, so they share its outcome: the one tried most
        decides (its attempt count is the group's).
        """
        attempts = max(r.attempts for r in rows) + 1
        delay = timedelta(seconds=max(backoff(attempts - 1), retry_after or 0.0))
        error = scrub(f"{type(exc).__name__}: {exc}")
        bound = min(self.max_attempts, REFUSALS_MAX) if deterministic else self.max_attempts
        dead = attempts >= bound
        if dead:
            error = "dead: " + error
        until = self.now + delay
        back_off(self.engine, rows, until, _cap(error), dead_at=self.now if dead else None)
        effect = rows[0].effect
        self.report.failed += len(rows)
        FAILURES_TOTAL.labels(effect).inc(len(rows))
        if effect == Effect.CALLBACK:
            metrics.CALLBACKS_TOTAL.labels("dead" if dead else "failed").inc(len(rows))
        if dead:
            self.report.dead += len(rows)
            DEAD_TOTAL.labels(effect).inc(len(rows))
            log.error(
                "outbox: %s is dead after %d attempts: %s",
                effect,
                attempts,
                error,
                extra={"operation_id": rows[0].operation_id, "effect": effect},
            )
        return until

    def _defer(self, rows: Sequence[Claimed], until: datetime) -> None:
        """Puts rows off to `until` without counting an attempt (GitLab asked for a pause)."""
        defer(self.engine, rows, until, "deferred: GitLab was unavailable")
        self.report.deferred += len(rows)


def _cap(text: str) -> str:
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"
