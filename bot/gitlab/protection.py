"""The bot's own branches (`gitops/*`) protected so that only the author account pushes and merges.

Anyone who may push to `gitops/<operation>` can change a change after its approval, so
`gitops-bot hooks install` protects the wildcard through GitLab's protected branches API:

- Premium/Ultimate: push and merge lists hold one user entry, the author account's. GitLab's
  answers there carry `user_id`/`group_id` on every entry, which is how we tell the editions.
- CE/Free: no per-user entries (GitLab ignores `allowed_to_*`), so the fallback is Maintainers
  (access level 40) for both; the command says so.
- Force pushes are allowed: GitLab refuses to rebase a protected source branch otherwise, and
  the bot rebases its MRs. Only those who may push can force-push.

`judge` says what is wrong with a rule (pure); `ensure_protection` reads first and then creates
the rule, or fixes it (PATCH on Premium; unprotect and protect again on CE, where PATCH cannot
change the lists), and is idempotent.

`merge_right` says, from a project's rules (`list_protection`), whether an account may merge
into a target branch, as GitLab decides it: the branch is protected when a rule's name matches
it (`*` matches any characters, `/` included), and then the account needs Developer and an entry
of a matching rule's push or merge list that lets it in (its user, or a role it has); an
unprotected branch takes a merge from any Developer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from bot.gitlab.calls import delete, get_json, get_list, post_json
from bot.gitlab.changes import BRANCH_PREFIX
from bot.gitlab.client import Account, Project
from bot.gitlab.errors import GitLabRefused, GitLabUnavailable, NotFound, translating

#: The rule the bot keeps on every managed project.
BOT_BRANCHES = f"{BRANCH_PREFIX}*"
DEVELOPER = 30
MAINTAINER = 40
ROLES = {0: "No one", 30: "Developers + Maintainers", 40: "Maintainers", 60: "Administrators"}
#: `judge` modes
AUTHOR_ONLY = "author"
MAINTAINERS = "maintainers"


@dataclass(frozen=True)
class AccessView:
    """One push or merge entry of a rule: a role, a user, a group or a deploy key."""

    id: int | None
    access_level: int | None
    user_id: int | None
    group_id: int | None
    deploy_key_id: int | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AccessView:
        """Parses one entry (missing or non-integer fields are None)."""

        def num(name: str) -> int | None:
            value = data.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        return cls(
            num("id"), num("access_level"), num("user_id"), num("group_id"), num("deploy_key_id")
        )


@dataclass(frozen=True)
class ProtectionView:
    """A protected branch rule as GitLab answered it."""

    name: str
    push: tuple[AccessView, ...]
    merge: tuple[AccessView, ...]
    allow_force_push: bool
    #: the entries carry `user_id` (Premium/Ultimate); CE's answers have no such key
    per_user: bool

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProtectionView:
        """Parses GET/POST/PATCH /protected_branches answers."""
        lists = {}
        per_user = False
        for kind in ("push", "merge"):
            rows = data.get(f"{kind}_access_levels")
            rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
            per_user = per_user or any("user_id" in row for row in rows)
            lists[kind] = tuple(AccessView.from_json(row) for row in rows)
        return cls(
            name=str(data.get("name") or ""),
            push=lists["push"],
            merge=lists["merge"],
            allow_force_push=data.get("allow_force_push") is True,
            per_user=per_user,
        )


@dataclass(frozen=True)
class Verdict:
    """Whether a rule is what the bot needs: `mode` says who may push when it is."""

    ok: bool
    #: AUTHOR_ONLY (Premium), MAINTAINERS (the CE fallback), or "" when not ok
    mode: str
    problems: tuple[str, ...]

    @property
    def text(self) -> str:
        """The problems in one line ("" when ok)."""
        return "; ".join(self.problems)


def _list_problems(
    kind: str, entries: tuple[AccessView, ...], author: int, per_user: bool
) -> list[str]:
    found: list[str] = []
    author_listed = False
    for entry in entries:
        if entry.user_id is not None:
            if entry.user_id == author:
                author_listed = True
            else:
                found.append(f"user #{entry.user_id} may {kind}")
        elif entry.group_id is not None:
            found.append(f"group #{entry.group_id} may {kind}")
        elif entry.deploy_key_id is not None:
            found.append(f"deploy key #{entry.deploy_key_id} may {kind}")
        elif (entry.access_level or 0) in {30, 40}:
            level = entry.access_level or 0
            if per_user or level < MAINTAINER:
                found.append(f"{ROLES[level]} may {kind}")
            else:
                author_listed = True  # the CE fallback: Maintainers, the author account among them
    if not author_listed:
        who = "the author account" if per_user else "Maintainers (and so the author account)"
        found.append(f"{who} may not {kind}")
    return found


def judge(view: ProtectionView | None, author_id: int) -> Verdict:
    """What is wrong with the `gitops/*` rule for an author account (nothing: ok)."""
    if view is None:
        return Verdict(False, "", ("not protected",))
    problems = [
        *_list_problems("push", view.push, author_id, view.per_user),
        *_list_problems("merge", view.merge, author_id, view.per_user),
    ]
    if not view.allow_force_push:
        problems.append("force push is off (GitLab would refuse the bot's rebases)")
    if problems:
        return Verdict(False, "", tuple(problems))
    return Verdict(True, AUTHOR_ONLY if view.per_user else MAINTAINERS, ())


def author_identity(account: Account) -> tuple[int, str]:
    """The account's user id and username (one GET /user)."""
    data = get_json(account.gl, "/user", what=f"{account.label}: read the current user")
    user_id, username = data.get("id"), data.get("username")
    if not isinstance(user_id, int) or not isinstance(username, str) or not username:
        raise GitLabUnavailable(f"{account.label}: GET /user answered without an id and username")
    return user_id, username


def _rule_path(project: Project, name: str) -> str:
    return f"{project.path}/protected_branches/{quote(name, safe='')}"


def read_protection(project: Project, name: str = BOT_BRANCHES) -> ProtectionView | None:
    """The rule named exactly `name`, or None when the branch is not protected (one GET)."""
    try:
        data = get_json(project.gl, _rule_path(project, name), what=f"read protection of {name}")
    except NotFound:
        return None
    return ProtectionView.from_json(data)


def list_protection(project: Project) -> list[ProtectionView]:
    """Every protected branch rule of the project, wildcards as written (one GET a page)."""
    rows = get_list(
        project.gl, f"{project.path}/protected_branches", what="list protected branches"
    )
    return [ProtectionView.from_json(row) for row in rows]


def covers(rule: str, branch: str) -> bool:
    """Whether a rule's name (exact, or with `*` wildcards) matches the branch."""
    if "*" not in rule:
        return rule == branch
    return re.fullmatch(".*".join(re.escape(part) for part in rule.split("*")), branch) is not None


@dataclass(frozen=True)
class MergeRight:
    """Whether an account may merge into a branch: "yes", "no", or "unknown" (only a group
    entry could let it in, and group memberships are not read), and why."""

    verdict: Literal["yes", "no", "unknown"]
    text: str


def _entry_text(entry: AccessView) -> str:
    if entry.user_id is not None:
        return f"user #{entry.user_id}"
    if entry.group_id is not None:
        return f"group #{entry.group_id}"
    if entry.deploy_key_id is not None:
        return f"deploy key #{entry.deploy_key_id}"
    return ROLES.get(entry.access_level or 0, f"level {entry.access_level}")


def _lets_in(entry: AccessView, user_id: int, level: int) -> bool | None:
    """Whether the entry lets the account push or merge (None: a group, not judged)."""
    if entry.user_id is not None:
        return entry.user_id == user_id
    if entry.group_id is not None:
        return None
    if entry.deploy_key_id is not None:
        return False
    # 0 is "No one"; 60 is instance administrators, which a bot account is not taken to be
    return entry.access_level in {DEVELOPER, MAINTAINER} and level >= (entry.access_level or 0)


def merge_right(
    rules: Sequence[ProtectionView], branch: str, user_id: int, level: int | None
) -> MergeRight:
    """Whether the account (its user id and access level on the project) may merge into the
    branch: GitLab lets whoever may push to it, or merge into it, merge an MR there (pure)."""
    if (level or 0) < DEVELOPER:
        return MergeRight("no", f"{branch}: the account is not Developer")
    matching = [rule for rule in rules if covers(rule.name, branch)]
    if not matching:
        return MergeRight("yes", f"{branch} is not protected")
    groups = False
    for rule in matching:
        for kind, entries in (("merge", rule.merge), ("push", rule.push)):
            for entry in entries:
                lets_in = _lets_in(entry, user_id, level or 0)
                if lets_in:
                    return MergeRight(
                        "yes", f"{branch}: {_entry_text(entry)} may {kind} (rule {rule.name})"
                    )
                groups = groups or lets_in is None
    allowed = "; ".join(
        f"rule {rule.name}: merge {', '.join(map(_entry_text, rule.merge)) or 'No one'}, "
        f"push {', '.join(map(_entry_text, rule.push)) or 'No one'}"
        for rule in matching
    )
    return MergeRight("unknown" if groups else "no", f"{branch} is protected ({allowed})")


@dataclass(frozen=True)
class ProtectionResult:
    """What `ensure_protection` found and did."""

    #: "created", "fixed" or "unchanged"
    action: str
    #: the problems before this call ("not protected" when the rule was missing)
    before: tuple[str, ...]
    #: the rule as GitLab left it
    verdict: Verdict


def _patch(project: Project, name: str, data: dict[str, Any]) -> dict[str, Any]:
    what = f"update protection of {name}"
    with translating(what, mutating=True):
        result = project.gl.http_patch(_rule_path(project, name), post_data=data)
    return result if isinstance(result, dict) else {}


def _create(project: Project, name: str, author_id: int) -> ProtectionView:
    # No *_access_level: Premium then keeps only the user entries, and CE (ignoring the lists)
    # falls back to its default, 40 (Maintainers).
    only_author = [{"user_id": author_id}]
    data = {
        "name": name,
        "allowed_to_push": only_author,
        "allowed_to_merge": only_author,
        "allow_force_push": True,
    }
    answer = post_json(
        project.gl, f"{project.path}/protected_branches", what=f"protect {name}", data=data
    )
    return ProtectionView.from_json(answer)


def _fix_lists(view: ProtectionView, author_id: int) -> dict[str, Any]:
    data: dict[str, Any] = {"allow_force_push": True}
    for kind, entries in (("push", view.push), ("merge", view.merge)):
        changes: list[dict[str, Any]] = [
            {"id": entry.id, "_destroy": True}
            for entry in entries
            if entry.user_id != author_id and entry.id is not None
        ]
        if not any(entry.user_id == author_id for entry in entries):
            changes.append({"user_id": author_id})
        data[f"allowed_to_{kind}"] = changes
    return data


def ensure_protection(
    project: Project, author_id: int, name: str = BOT_BRANCHES
) -> ProtectionResult:
    """Makes `name` protected so that only the author account (CE: Maintainers) pushes, merges
    and force-pushes there. Calls: one GET; then nothing, one POST, one PATCH, or (CE, wrong
    lists) one DELETE and one POST."""
    view = read_protection(project, name)
    before = judge(view, author_id)
    if before.ok:
        return ProtectionResult("unchanged", (), before)
    if view is None:
        try:
            created = _create(project, name, author_id)
            return ProtectionResult("created", before.problems, judge(created, author_id))
        except GitLabRefused as exc:
            if exc.status_code != 409:
                raise
        # protected meanwhile (another install): judge and fix that rule instead
        view = read_protection(project, name)
        if view is None:
            raise GitLabUnavailable(f"protect {name}: GitLab answered 409, then 404")
        before = judge(view, author_id)
        if before.ok:
            return ProtectionResult("unchanged", (), before)
    lists_ok = all("force push" in problem for problem in before.problems)
    if view.per_user or lists_ok:
        data = _fix_lists(view, author_id) if view.per_user else {"allow_force_push": True}
        fixed = ProtectionView.from_json(_patch(project, name, data))
    else:
        # CE: PATCH cannot change the lists; protect again (the branch is unprotected meanwhile)
        delete(project.gl, _rule_path(project, name), what=f"unprotect {name}")
        fixed = _create(project, name, author_id)
    return ProtectionResult("fixed", before.problems, judge(fixed, author_id))
