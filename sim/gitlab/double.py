"""`GitLabDouble`: an in-memory GitLab speaking a REST v4 subset, for every test tier.

In-process through `responses` (`mount` / `mocked`), or as a real local server (`serve`).
`responses` is imported only when used: the demo runs the double without the test extras.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from . import server, timing, versions
from .app import DoubleApp, HungCall
from .deliveries import WebhookMixin
from .faults import Call, FaultPlan, FaultRule, FaultStatus, select
from .model import PIPELINE_STATUSES, RUNNING_STATUSES, MergeRequest, Project, User
from .oauth import OAuthMixin
from .seeding import ProjectRef
from .state import State

if TYPE_CHECKING:
    import responses


class GitLabDouble(WebhookMixin, OAuthMixin):
    """A stateful fake GitLab: seed it, point a client at it, steer it, inspect it."""

    def __init__(
        self,
        web_url: str = "https://gitlab.example.com",
        *,
        mode: str | None = None,
        clock: Callable[[], datetime] | None = None,
        version: str | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self.state = State(web_url, clock or (lambda: datetime.now(UTC)))
        if mode is not None and version is not None:
            raise ValueError("give a version profile or a mode, not both")
        self.version = version or versions.MODES.get(mode or "new", mode or "")
        self.faults = FaultPlan()
        self.calls: list[Call] = []
        self.app = DoubleApp(self.state, self.lock, self.faults, self.calls, threading.Event())

    # -- settings --------------------------------------------------------------------------

    @property
    def version(self) -> str:
        """The GitLab version profile the double answers as (versions.py): "15.11", "16.11",
        "17.5", "17.11", "19.5" (the newest), or "sim" (the default: what the double answered
        before profiles) / "sim-old". `GET /version` answers the profile's version."""
        return self.state.profile.name

    @version.setter
    def version(self, value: str) -> None:
        with self.lock:
            self.state.profile = versions.profile(value)

    @property
    def profile(self) -> versions.Profile:
        """The selected version profile (read it for the expected status codes)."""
        return self.state.profile

    @property
    def mode(self) -> str:
        """The old switch, kept for the tests written with it: "old" is the "sim-old" profile
        (401 on a repeat approve, 406 on conflict), "new" the "sim" one (304, 422); any other
        profile reads as its name."""
        names = {profile: mode for mode, profile in versions.MODES.items()}
        return names.get(self.state.profile.name, self.state.profile.name)

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in versions.MODES:
            raise ValueError("mode is 'old' or 'new'")
        self.version = versions.MODES[value]

    @property
    def hook_auto_disabling(self) -> bool:
        """GitLab's `auto_disabling_web_hooks`: True (GitLab.com; the default) disables a hook
        after four consecutive failed deliveries as the profile's release does; False is a
        Self-Managed instance as installed (the flag is off by default since 15.10, #390157)."""
        return self.state.hook_auto_disabling

    @hook_auto_disabling.setter
    def hook_auto_disabling(self, value: bool) -> None:
        with self.lock:
            self.state.hook_auto_disabling = value

    def require_sha_for_merge(self, namespace: str, enabled: bool = True) -> None:
        """The group setting "Require a commit SHA on the merge requests API" (GitLab 19.2+,
        !236732; on by default for groups created on 19.2.0-19.2.5 and 19.3.0-19.3.1): a merge
        without `sha` in a project of `namespace` (or a subgroup) is refused 400 "SHA must be
        provided when merging". Only profiles with `require_sha_setting` have it."""
        with self.lock:
            if enabled and not self.state.profile.require_sha_setting:
                raise ValueError(f"GitLab {self.state.profile.name} has no require_sha_for_merge")
            names = self.state.require_sha_namespaces
            names.add(namespace) if enabled else names.discard(namespace)

    @property
    def edition(self) -> str:
        """ "premium" (default: protected branches take per-user and per-group entries) or "ce"
        (roles only: the API ignores `allowed_to_*` as GitLab CE does, and answers without
        `user_id`/`group_id`)."""
        return self.state.edition

    @edition.setter
    def edition(self, value: str) -> None:
        if value not in {"premium", "ce"}:
            raise ValueError("edition is 'premium' or 'ce'")
        with self.lock:
            self.state.edition = value

    @property
    def new_pipeline_status(self) -> str:
        """The status new pipelines start in ("running"; "success" to auto-pass)."""
        return self.state.new_pipeline_status

    @new_pipeline_status.setter
    def new_pipeline_status(self, value: str) -> None:
        self.state.new_pipeline_status = value

    @property
    def rebase_auto_after(self) -> int | None:
        """Reads of an MR that see a rebase in progress before it completes (None: never)."""
        return self.state.rebase_auto_after

    @rebase_auto_after.setter
    def rebase_auto_after(self, value: int | None) -> None:
        self.state.rebase_auto_after = value

    @property
    def pipeline_seconds(self) -> float | None:
        """Seconds of the double's clock a running MR pipeline takes before it finishes by
        itself, in `pipeline_result`, with its Pipeline Hook (None: only when told); see
        `run_due`."""
        return self.state.pipeline_seconds

    @pipeline_seconds.setter
    def pipeline_seconds(self, value: float | None) -> None:
        if value is not None and value < 0:
            raise ValueError("pipeline_seconds is None or at least 0")
        self.state.pipeline_seconds = value

    @property
    def pipeline_result(self) -> str:
        """The status a timed pipeline finishes in ("success"; "failed" to fail them all)."""
        return self.state.pipeline_result

    @pipeline_result.setter
    def pipeline_result(self, value: str) -> None:
        if value in RUNNING_STATUSES or value not in PIPELINE_STATUSES:
            raise ValueError(f"a pipeline cannot finish as {value!r}")
        self.state.pipeline_result = value

    @property
    def rebase_seconds(self) -> float | None:
        """Seconds of the double's clock a queued rebase takes before it completes by itself
        (None: only when told or after `rebase_auto_after` reads); see `run_due`."""
        return self.state.rebase_seconds

    @rebase_seconds.setter
    def rebase_seconds(self, value: float | None) -> None:
        if value is not None and value < 0:
            raise ValueError("rebase_seconds is None or at least 0")
        self.state.rebase_seconds = value

    def next_due(self) -> datetime | None:
        """When the next timed pipeline or rebase falls due on the double's clock (None:
        nothing timed is running)."""
        with self.lock:
            return timing.next_due(self.state)

    def run_due(self) -> int:
        """Finishes, in time order, every timed pipeline and rebase due by the double's clock
        (their webhooks queued as GitLab would send them); how many finished."""
        with self.lock:
            return timing.run_due(self.state)

    @property
    def hang_seconds(self) -> float:
        """How long a real-server "timeout" fault holds its answer (at most 30 s)."""
        return self.app.hang_seconds

    @hang_seconds.setter
    def hang_seconds(self, value: float) -> None:
        self.app.hang_seconds = value

    # -- transports ------------------------------------------------------------------------

    def mount(
        self, mock: responses.RequestsMock, base_url: str = "https://gitlab.example.com"
    ) -> None:
        """Routes every call under `{base_url}/api/v4/` on this `responses` mock to the double.

        One callback per method is registered: use `assert_all_requests_are_fired=False`
        (or `mocked()`), since a test rarely uses every method."""
        server.mount(self.app, mock, base_url)

    @contextmanager
    def mocked(
        self, base_url: str = "https://gitlab.example.com"
    ) -> Iterator[responses.RequestsMock]:
        """A `responses` mock with the double mounted (unfired methods are not an error)."""
        import responses

        with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
            self.mount(mock, base_url)
            yield mock

    def serve(self, host: str = "127.0.0.1") -> AbstractContextManager[str]:
        """Runs the double as a threaded HTTP server on a free port; yields its base URL."""
        return server.serve(self.app, host)

    # -- faults and calls ------------------------------------------------------------------

    def fail_next(
        self,
        n: int = 1,
        status: FaultStatus = 500,
        *,
        methods: str | Iterable[str] | None = None,
        path_contains: str | None = None,
        retry_after: float | None = None,
        apply: bool = True,
        path_endswith: str | None = None,
    ) -> FaultRule:
        """The next `n` matching calls answer `status`; "timeout" applies (unless `apply=False`)
        the call, then raises ReadTimeout (responses) or hangs (server). `path_endswith` tells
        `/merge` from `/merge_requests/7`."""
        with self.lock:
            return self.faults.add(
                n, status, methods, path_contains, retry_after, apply, path_endswith
            )

    def fail_randomly(
        self, rate: float, statuses: Iterable[int] = (500, 502, 503), *, seed: int | None = None
    ) -> None:
        """From now on each call (not taken by a queued fault) fails with probability `rate`
        (0 turns it off), answering one of `statuses`; `seed` makes the draw repeatable."""
        with self.lock:
            self.faults.fail_randomly(rate, list(statuses), seed)

    def calls_matching(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        *,
        path_endswith: str | None = None,
        status: int | None = None,
    ) -> list[Call]:
        """Recorded calls matching every filter (paths decoded, after `/api/v4`)."""
        with self.lock:
            return select(list(self.calls), method, path_contains, path_endswith, status)

    def count(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        *,
        path_endswith: str | None = None,
        status: int | None = None,
    ) -> int:
        """How many recorded calls match (note "/merge" also matches "/merge_requests")."""
        return len(
            self.calls_matching(method, path_contains, path_endswith=path_endswith, status=status)
        )

    def hung_calls(self) -> list[HungCall]:
        """Calls a real-server "timeout" fault is holding now (with the caller's TCP port)."""
        with self.lock:
            return [call for call in self.app.hung if not call.released.is_set()]

    def release_hung(self) -> None:
        """Lets every held call answer now (the client may have given up already)."""
        self.app.release_hung()

    def clear_calls(self) -> None:
        """Forgets the recorded calls."""
        with self.lock:
            self.calls.clear()

    # -- inspection ------------------------------------------------------------------------

    def project(self, project: ProjectRef) -> Project:
        """A project (live object: read it, don't mutate it)."""
        with self.lock:
            return self._p(project)

    def user(self, username: str) -> User:
        """A user by username."""
        with self.lock:
            return self.state.user_named(username)

    def mr(self, project: ProjectRef, iid: int) -> MergeRequest:
        """A merge request (live object: read it, don't mutate it)."""
        with self.lock:
            return self.state.mr(self._p(project), iid)

    def detailed_merge_status(self, project: ProjectRef, iid: int) -> str:
        """What the API would answer as `detailed_merge_status` now."""
        with self.lock:
            p = self._p(project)
            return self.state.detailed_status(p, self.state.mr(p, iid))

    def branch_head(self, project: ProjectRef, branch: str) -> str | None:
        """The sha a branch points at, or None when it does not exist."""
        with self.lock:
            return self._p(project).branches.get(branch)
