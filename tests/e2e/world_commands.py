"""What the role-matrix scenario reads and does on an MR: people, their comments, the bot's
awards and replies, and the rows a command wrote (a base of World)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import requests
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from bot.store.models import AUDIT, BINDINGS, OPERATIONS, OUTBOX
from sim.gitlab import GitLabDouble, Note
from tests.e2e.names import AUTHOR, PROJECT, SECRETS


class CommandViews:
    """MR commands: people, their comments, the bot's answers (World provides the fields)."""

    engine: Engine
    gitlab: GitLabDouble
    web: list[str]

    def add_people(self, people: Mapping[str, int]) -> None:
        """GitLab users with their access level on PROJECT (0: not a member); known names kept."""
        with self.gitlab.lock:
            known = {u.username for u in self.gitlab.state.users.values()}
        for name, level in people.items():
            if name not in known:
                access = {PROJECT: level} if level else {}
                self.gitlab.add_user(name, token=f"{name}-token", access=access)

    def comment(self, iid: int, user: str, body: str) -> Note:
        """`user` comments `body` on MR !iid (the double sends the Note Hook)."""
        return self.gitlab.add_note(PROJECT, iid, user, body)

    def forged_note_hook(
        self, iid: int, note_id: int | None, forge: Callable[[dict[str, Any]], None], **attrs: Any
    ) -> int:
        """Posts a Note Hook carrying the right secret whose payload `forge` rewrote (what anyone
        holding the webhook secret could send) to the first web instance; the HTTP status.
        Without `note_id` the hook names a comment GitLab does not hold."""
        headers, body = self.gitlab.webhook(
            "note", project=PROJECT, iid=iid, note_id=note_id, token=SECRETS["webhook"], **attrs
        )
        payload = json.loads(body)
        forge(payload)
        data = json.dumps(payload).encode()
        url = f"{self.web[0]}/webhooks/gitlab"
        return requests.post(url, data=data, headers=headers, timeout=10).status_code

    def user_hash(self, username: str) -> dict[str, Any]:
        """The `user` object a Note Hook carries for `username`."""
        user = self.gitlab.user(username)
        return {"id": user.id, "username": username, "name": user.name}

    def set_mr_pipeline(self, iid: int, status: str) -> None:
        """Moves MR !iid's head pipeline to `status` (as CI finishing it would)."""
        pipeline = self.gitlab.latest_pipeline(PROJECT, iid)
        assert pipeline is not None, f"!{iid} has no pipeline"
        self.gitlab.set_pipeline(PROJECT, pipeline.id, status)

    def awards_on(self, iid: int, note_id: int) -> list[tuple[str, str]]:
        """(emoji, username) of every award on a note of MR !iid."""
        with self.gitlab.lock:
            users = self.gitlab.state.users
            note = self.gitlab.mr(PROJECT, iid).notes[note_id]
            return [(a.name, users[a.user_id].username) for a in note.awards]

    def replies_to(self, iid: int, note_id: int) -> list[str]:
        """Bodies of the bot's replies to one note of MR !iid (found by their hidden marker)."""
        marker = f"<!-- gitops-bot:reply:{int(note_id)} -->"
        with self.gitlab.lock:
            me = self.gitlab.user(AUTHOR).id
            notes = list(self.gitlab.mr(PROJECT, iid).notes.values())
        return [n.body for n in notes if n.author_id == me and marker in n.body]

    def mr_operations(self, iid: int) -> list[dict[str, Any]]:
        """Operations carrying MR !iid, oldest first: id, flow, version, binding state, owner."""
        query = (
            select(
                OPERATIONS.c.id,
                OPERATIONS.c.flow,
                OPERATIONS.c.version,
                BINDINGS.c.state,
                (BINDINGS.c.operation_id == OPERATIONS.c.id).label("owner"),
            )
            .join(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)
            .where(OPERATIONS.c.project == PROJECT, OPERATIONS.c.mr_iid == iid)
            .order_by(OPERATIONS.c.created_at, OPERATIONS.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def reverts_of(self, op_id: str) -> list[dict[str, Any]]:
        """Revert operations of `op_id`: id, and whether each owns its binding."""
        query = (
            select(OPERATIONS.c.id, (BINDINGS.c.operation_id == OPERATIONS.c.id).label("owner"))
            .join(BINDINGS, BINDINGS.c.id == OPERATIONS.c.binding_id)
            .where(OPERATIONS.c.reverts_operation_id == op_id)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def status_writes(self, op_id: str) -> int:
        """Status-comment outbox rows written for an operation (sent or not)."""
        query = (
            select(func.count())
            .select_from(OUTBOX)
            .where(OUTBOX.c.operation_id == op_id, OUTBOX.c.effect == "status_comment")
        )
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def note_audit(self, note_id: int, suffix: str = "") -> list[dict[str, Any]]:
        """Audit rows a note's command wrote (correlation id `note:<id>` + `suffix`), oldest
        first; `suffix=":ignored"` for a note that never runs (the bot's own, an edit...)."""
        query = (
            select(AUDIT)
            .where(AUDIT.c.correlation_id == f"note:{int(note_id)}{suffix}")
            .order_by(AUDIT.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]
