"""Seeding helpers of the double (a mixin): users, projects, commits, MRs and hooks."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from . import mr_ops, protection
from .model import (
    HOOK_FLAGS,
    Access,
    AccessEntry,
    Hook,
    MergeRequest,
    Project,
    ProtectedBranch,
    User,
)
from .state import State

ProjectRef = str | int | Project
UserRef = str | User


class SeedingMixin:
    """Seeding helpers; every one runs under the double's lock."""

    state: State
    lock: threading.RLock

    def _p(self, project: ProjectRef) -> Project:
        return project if isinstance(project, Project) else self.state.project(project)

    def _u(self, user: UserRef) -> User:
        return user if isinstance(user, User) else self.state.user_named(user)

    # -- seeding ---------------------------------------------------------------------------

    def add_user(
        self,
        username: str,
        *,
        token: str | None = None,
        name: str | None = None,
        access: Mapping[str, int] | None = None,
        scopes: tuple[str, ...] = ("api",),
    ) -> User:
        """A user (with an API token of `scopes` if given) and its access level per project."""
        with self.lock:
            user = User(
                self.state.next_id("user"), username, name or username.title(), token, scopes
            )
            self.state.users[user.id] = user
            for path, level in (access or {}).items():
                self.state.project(path).members[user.id] = level
            return user

    def add_project(
        self,
        path: str,
        *,
        default_branch: str = "main",
        files: Mapping[str, str] | None = None,
        required_approvals: int = 0,
        merge_method: str = "merge",
        pipelines: bool = True,
        pipeline_must_succeed: bool = True,
        reset_approvals_on_push: bool = False,
        protect_default: bool = True,
        ci_config_path: str | None = None,
        visibility: str = "internal",
        merge_pipelines: bool = False,
        squash_option: str = "default_off",
        branch_pipelines: Iterable[str] = (),
        async_effects: bool | None = None,
    ) -> Project:
        """A project whose default branch holds `files` (one initial commit); `visibility`
        "private" hides it from non-members. The default branch is protected as GitLab's
        default `default_branch_protection_defaults` ("fully protected": push and merge for
        Maintainers, no force push) protects it when it is first created;
        `protect_default=False` is an instance set to "not protected".

        The flow's settings (control_flow.py): `merge_method` ("merge", "rebase_merge", "ff"),
        `merge_pipelines` (merged results pipelines, Premium), `squash_option`,
        `pipeline_must_succeed`, `reset_approvals_on_push`, `branch_pipelines` (branches whose
        pushes run a branch pipeline) and `async_effects` (GitLab's asynchronous effects for
        this project; None follows the double's switch)."""
        with self.lock:
            state = self.state
            project = Project(state.next_id("project"), path, default_branch, state.clock())
            project.required_approvals = required_approvals
            project.merge_method = merge_method
            project.pipelines_enabled = pipelines
            project.pipeline_must_succeed = pipeline_must_succeed
            project.reset_approvals_on_push = reset_approvals_on_push
            project.ci_config_path = ci_config_path
            project.visibility = visibility
            project.merge_pipelines_enabled = merge_pipelines
            project.squash_option = squash_option
            project.branch_pipelines = set(branch_pipelines)
            project.async_effects = async_effects
            state.projects[project.id] = project
            if "root" not in {u.username for u in state.users.values()}:
                self.add_user("root", name="Administrator")
            root = state.user_named("root")
            project.members.setdefault(root.id, Access.OWNER)
            commit = state.make_commit((), dict(files or {}), "Initial commit", root.id)
            project.branches[default_branch] = commit.sha
        if protect_default:
            self.protect_branch(project.id, default_branch)
        return project

    def protect_branch(
        self,
        project: ProjectRef,
        name: str,
        *,
        push: Iterable[int | str] = (Access.MAINTAINER,),
        merge: Iterable[int | str] = (Access.MAINTAINER,),
        allow_force_push: bool = False,
    ) -> ProtectedBranch:
        """Protects a branch or wildcard as someone did in the settings: `push` and `merge` list
        access levels (0, 30, 40, 60) and usernames (user entries, Premium's kind); replaces a
        rule of the same name."""
        with self.lock:
            p = self._p(project)
            rule = ProtectedBranch(self.state.next_id("protected_branch", 100), name)
            rule.allow_force_push = allow_force_push
            for entries, wanted in ((rule.push, push), (rule.merge, merge)):
                for item in wanted:
                    entry = AccessEntry(self.state.next_id("access_level", 1000))
                    if isinstance(item, str):
                        entry.user_id = self._u(item).id
                    else:
                        entry.access_level = int(item)
                    entries.append(entry)
            rule.unprotect.append(
                AccessEntry(self.state.next_id("access_level", 1000), Access.MAINTAINER)
            )
            p.protected_branches[name] = rule
            return rule

    def set_ci_config_path(self, project: ProjectRef, value: str | None) -> None:
        """Sets the project's custom CI/CD configuration file (None: `.gitlab-ci.yml`)."""
        with self.lock:
            self._p(project).ci_config_path = value

    def add_member(self, project: ProjectRef, user: UserRef, access_level: int) -> None:
        """Makes `user` a member with `access_level` (0 removes it)."""
        with self.lock:
            members = self._p(project).members
            if access_level <= 0:
                members.pop(self._u(user).id, None)
            else:
                members[self._u(user).id] = access_level

    def deny_approval(self, project: ProjectRef, user: UserRef) -> None:
        """Configures `user` as not allowed to approve in this project (approve answers 401)."""
        with self.lock:
            self._p(project).denied_approvers.add(self._u(user).id)

    def require_check_items(self, project: ProjectRef, items: Iterable[str] | None) -> None:
        """Turns the check-items mode on with `items` (None turns it off)."""
        with self.lock:
            self._p(project).check_items = None if items is None else list(items)

    def push(
        self,
        project: ProjectRef,
        branch: str,
        files: Mapping[str, str | None],
        *,
        author: UserRef = "root",
        message: str = "Update files",
        start_branch: str | None = None,
    ) -> str:
        """Commits files (None deletes) on `branch` as a person; returns the new sha.

        A protected branch the person may not push to raises ApiError(403) as `git push` fails.
        """
        with self.lock:
            p = self._p(project)
            start = p.branches.get(branch) or p.branches[start_branch or p.default_branch]
            protection.check_person_push(self.state, p, self._u(author), branch, start)
            tree = dict(self.state.commits[start].tree)
            for path, content in files.items():
                if content is None:
                    tree.pop(path, None)
                else:
                    tree[path] = content
            commit = self.state.push(p, branch, tree, message, self._u(author), start)
            return commit.sha

    def add_tag(self, project: ProjectRef, name: str, ref: str) -> str:
        """Tags commit `ref` (a sha, tag or branch) as `name`, as someone pushing a tag does;
        returns the tagged sha."""
        with self.lock:
            p = self._p(project)
            sha = p.branches.get(ref) or p.tags.get(ref) or ref
            if sha not in self.state.commits:
                raise KeyError(ref)
            p.tags[name] = sha
            return sha

    def advance_branch(
        self, project: ProjectRef, branch: str | None = None, files: Mapping[str, str] | None = None
    ) -> str:
        """Moves a branch ahead (by default a new, non-conflicting file) so MRs fall behind."""
        with self.lock:
            p = self._p(project)
            n = self.state.next_id("advance")
            return self.push(p, branch or p.default_branch, files or {f".advance/{n}": f"{n}\n"})

    def open_mr(
        self,
        project: ProjectRef,
        source_branch: str,
        *,
        author: UserRef = "root",
        target_branch: str | None = None,
        title: str | None = None,
        files: Mapping[str, str | None] | None = None,
        description: str = "",
        labels: Iterable[str] = (),
        remove_source_branch: bool = False,
        source_project: ProjectRef | None = None,
    ) -> MergeRequest:
        """Opens an MR as a person, first committing `files` on a new or existing branch."""
        with self.lock:
            p = self._p(project)
            source = self._p(source_project) if source_project is not None else p
            target = target_branch or p.default_branch
            if files is not None or source_branch not in source.branches:
                changes = {f"changes/{source_branch}.txt": f"{source_branch}\n"}
                message = title or f"Change {source_branch}"
                self.push(
                    source,
                    source_branch,
                    changes if files is None else files,
                    author=author,
                    message=message,
                )
            return mr_ops.open_mr(
                self.state,
                p,
                self._u(author),
                source_branch=source_branch,
                target_branch=target,
                title=title or f"Change {source_branch}",
                description=description,
                labels=labels,
                remove_source_branch=remove_source_branch,
                source_project=source,
            )

    def add_hook(
        self,
        project: ProjectRef,
        url: str,
        *,
        token: str | None = None,
        events: Iterable[str] = (
            "merge_requests_events",
            "pipeline_events",
            "note_events",
            "deployment_events",
        ),
    ) -> Hook:
        """A project hook subscribed to `events` (hook flag names)."""
        with self.lock:
            p = self._p(project)
            flags = dict(HOOK_FLAGS) | dict.fromkeys(events, True)
            hook = Hook(
                self.state.next_id("hook"), p.id, url, token, flags, True, self.state.clock()
            )
            p.hooks[hook.id] = hook
            return hook
