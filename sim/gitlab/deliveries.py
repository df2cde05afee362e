"""Webhook methods of the double (a mixin): build, send, and drain what GitLab would send."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import requests

from . import webhooks
from .control import ControlMixin
from .model import Deployment, Hook, MergeRequest, Note, Project, User
from .seeding import ProjectRef, UserRef

#: Accepted spellings of webhook kinds (ours and the X-Gitlab-Event names).
KINDS = {kind: kind for kind in webhooks.EVENTS} | {
    header: kind for kind, (_, header) in webhooks.EVENTS.items()
}


class WebhookMixin(ControlMixin):
    """Webhook payloads from the double's state, with GitLab's headers."""

    @property
    def outgoing(self) -> list[webhooks.Delivery]:
        """Webhooks GitLab would have sent to enabled, subscribed hooks (oldest first)."""
        return self.state.outgoing

    def take_outgoing(self, timeout: float = 0.0) -> list[webhooks.Delivery]:
        """Waits up to `timeout` seconds for a queued webhook, then removes and returns all."""
        self.state.emitted.wait(timeout)
        with self.lock:
            self.state.emitted.clear()
            queued = list(self.state.outgoing)
            self.state.outgoing.clear()
        return queued

    def webhook(
        self,
        kind: str,
        *,
        project: ProjectRef,
        iid: int | None = None,
        note_id: int | None = None,
        pipeline_id: int | None = None,
        deployment_id: int | None = None,
        user: UserRef | None = None,
        action: str | None = None,
        changes: Mapping[str, Any] | None = None,
        token: str | None = None,
        idempotency_key: str | None = None,
        **attrs: Any,
    ) -> tuple[dict[str, str], bytes]:
        """(headers, body) of a webhook from the current state; `attrs` overwrite
        object_attributes keys (top-level keys for deployments), e.g. note=, status=, system=.
        The token defaults to the project's first hook's secret. Without `note_id` a note hook
        carries a new, unstored note; without `deployment_id` a deployment of the default
        branch head; without `pipeline_id` the MR's head pipeline."""
        kind = KINDS[kind]
        with self.lock:
            p = self._p(project)
            mr = self.state.mr(p, iid) if iid is not None else None
            actor = self._u(user) if user is not None else None
            build: dict[str, Any] = {"mr": mr, "action": action, "changes": changes, "attrs": attrs}
            if kind == "note":
                assert mr is not None, "a note webhook needs iid"
                build["note"] = self._webhook_note(p, mr, note_id, actor)
                actor = actor or self.state.users[build["note"].author_id]
            elif kind == "pipeline":
                pipeline = p.pipelines[pipeline_id] if pipeline_id else None
                if pipeline is None and mr is not None:
                    pipeline = self.state.head_pipeline(p, mr)
                assert pipeline is not None, "a pipeline webhook needs pipeline_id or an MR's"
                build["pipeline"] = pipeline
                build["mr"] = mr or (p.mrs.get(pipeline.mr_iid) if pipeline.mr_iid else None)
                actor = actor or self.state.users[pipeline.user_id]
            elif kind == "deployment":
                build["deployment"] = self._webhook_deployment(p, deployment_id, actor)
            elif mr is None:
                raise AssertionError("a merge_request webhook needs iid")
            actor = actor or self.state.users[mr.author_id if mr else min(p.members)]
            payload = webhooks.build(self.state, kind, project=p, actor=actor, **build)
            secret = (
                token
                if token is not None
                else next((h.token for h in p.hooks.values() if h.token), None)
            )
            headers = webhooks.headers(
                kind,
                secret,
                instance=self.state.web_url,
                idempotency_key=idempotency_key,
                profile=self.state.profile,
            )
            return headers, json.dumps(payload).encode()

    def _webhook_note(
        self, p: Project, mr: MergeRequest, note_id: int | None, actor: User | None
    ) -> Note:
        if note_id is not None:
            return mr.notes[note_id]
        now = self.state.clock()
        author = actor or self.state.users[mr.author_id]
        return Note(self.state.next_id("note", 3000), "", author.id, mr.iid, now, now)

    def _webhook_deployment(
        self, p: Project, deployment_id: int | None, actor: User | None
    ) -> Deployment:
        if deployment_id is not None:
            return p.deployments[deployment_id]
        now = self.state.clock()
        head = p.branches[p.default_branch]
        user_id = actor.id if actor else min(p.members)
        return Deployment(
            self.state.next_id("deployment", 20),
            p.id,
            "production",
            "success",
            head,
            p.default_branch,
            user_id,
            self.state.next_id("job", 900),
            now,
        )

    def deliver(
        self,
        url: str,
        kind: str,
        *,
        session: requests.Session | None = None,
        timeout: float = 10.0,
        **webhook_args: Any,
    ) -> requests.Response:
        """Builds a webhook (see `webhook`) and POSTs it to `url`, as GitLab would."""
        headers, body = self.webhook(kind, **webhook_args)
        sender = session or requests
        return sender.post(url, data=body, headers=headers, timeout=timeout)

    def deliver_outgoing(
        self,
        *,
        url: str | None = None,
        session: requests.Session | None = None,
        timeout: float = 10.0,
    ) -> list[tuple[webhooks.Delivery, requests.Response]]:
        """POSTs and removes every queued webhook (to its hook's URL, or `url`), as GitLab's
        WebHookService does: a delivery whose hook was disabled meanwhile is dropped unsent,
        and each answer counts for the hook's auto-disabling (`hook_answered`)."""
        with self.lock:
            queued = list(self.state.outgoing)
            self.state.outgoing.clear()
        sender = session or requests
        sent = []
        for delivery in queued:
            if not self.deliverable(delivery):
                continue
            target = url or delivery.url
            assert target, "a delivery needs a URL"
            try:
                response = sender.post(
                    target, data=delivery.body, headers=delivery.headers, timeout=timeout
                )
            except requests.RequestException:
                self.hook_answered(delivery, 0)
                raise
            self.hook_answered(delivery, response.status_code)
            sent.append((delivery, response))
        return sent

    # -- auto-disabling ------------------------------------------------------------------------

    def _delivery_hook(self, delivery: webhooks.Delivery) -> Hook | None:
        if delivery.hook_id is None:
            return None
        for project in self.state.projects.values():
            if delivery.hook_id in project.hooks:
                return project.hooks[delivery.hook_id]
        return None

    def deliverable(self, delivery: webhooks.Delivery) -> bool:
        """Whether GitLab would still send this queued delivery now: its hook exists and is
        executable (WebHookService#execute: `return ... 'Hook disabled' if disabled?`). A
        delivery a test built (no hook) always is."""
        with self.lock:
            if delivery.hook_id is None:
                return True
            hook = self._delivery_hook(delivery)
            return hook is not None and self.state.hook_executable(hook)

    def hook_answered(self, delivery: webhooks.Delivery, status: int) -> None:
        """Counts one answer to a delivery for its hook's auto-disabling, as the version
        profile's GitLab does (`webhooks.record_answer`); `status` 0 is no answer (a timeout, a
        refused connection). Nothing when `hook_auto_disabling` is off."""
        with self.lock:
            hook = self._delivery_hook(delivery)
            if hook is None or not self.state.hook_auto_disabling:
                return
            webhooks.record_answer(self.state.profile, hook, status, self.state.clock())
