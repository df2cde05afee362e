"""Project webhooks: list them, make sure ours exists as configured, see which GitLab disabled.

GitLab disables a hook after 4 failed deliveries in a row (for a while, then longer, and since
17.11 after 40 failures for good), so an operator needs to see it: `alert_status` other than
"executable", or `disabled_until` in the future.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.gitlab.calls import get_list, post_json, put_json
from bot.gitlab.client import Project
from bot.gitlab.errors import register_secret
from bot.gitlab.views import HOOK_EVENTS, HookView


@dataclass(frozen=True)
class HookResult:
    """Our hook after `ensure_hook`: whether this call created it, whether GitLab disabled it."""

    hook: HookView
    created: bool
    #: GitLab had stopped sending to it (before this call updated it)
    was_disabled: bool
    #: GitLab still shows it disabled after the update
    disabled: bool


def list_hooks(project: Project) -> list[HookView]:
    """The project's webhooks (one GET per 100)."""
    rows = get_list(project.gl, f"{project.path}/hooks", what="list webhooks")
    return [HookView.from_json(row) for row in rows]


def disabled_hooks(hooks: Iterable[HookView], now: datetime) -> list[HookView]:
    """The hooks GitLab is not sending to at `now`."""
    return [hook for hook in hooks if hook.disabled(now)]


def ensure_hook(
    project: Project,
    url: str,
    token: str,
    events: Iterable[str],
    *,
    now: datetime | None = None,
) -> HookResult:
    """Creates our hook, or updates the one with this URL (events, secret token); idempotent.

    Every managed event flag not in `events` is turned off (GitLab turns push events on by
    default). Calls: one list, then one create or one update.
    """
    wanted = set(events)
    unknown = wanted - set(HOOK_EVENTS)
    if unknown:
        raise ValueError(f"unknown hook events: {sorted(unknown)}")
    register_secret(token)
    now = now or datetime.now(UTC)
    data: dict[str, object] = {name: name in wanted for name in HOOK_EVENTS}
    data.update(url=url, token=token, enable_ssl_verification=url.startswith("https://"))
    existing = next((hook for hook in list_hooks(project) if hook.url == url), None)
    if existing is None:
        answer = post_json(project.gl, f"{project.path}/hooks", what="create webhook", data=data)
        hook = HookView.from_json(answer)
        return HookResult(hook, created=True, was_disabled=False, disabled=hook.disabled(now))
    answer = put_json(
        project.gl, f"{project.path}/hooks/{existing.id}", what="update webhook", data=data
    )
    hook = HookView.from_json(answer) if answer else existing
    return HookResult(
        hook, created=False, was_disabled=existing.disabled(now), disabled=hook.disabled(now)
    )
