"""Trust on the Procfile's processes: protected paths are refused on all three ways in, a deploy
callback naming another change's operation changes nothing, and requester text reaches GitLab
inert (no quick action, no mass mention, no bidi control)."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest
import requests

from bot.core.states import BindingState as S
from bot.core.states import Flow
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.world import AUTHOR, PROJECT, SECRETS, SETTLE, World

pytestmark = pytest.mark.e2e

REFUSED = "no_entry_sign"


def _apply_refused(world: World, iid: int, user: str, verb: str, path: str) -> None:
    """`user` types `/gitops <verb>` on !iid: 🚫, one reply naming `path`, nothing started."""
    before = world.mr_operations(iid)
    note = world.comment(iid, user, f"/gitops {verb}")
    wait_until(
        lambda: (REFUSED, AUTHOR) in world.awards_on(iid, note.id),
        SETTLE,
        f"the refusal of /gitops {verb} on !{iid}",
        interval=0.1,
    )
    wait_until(lambda: bool(world.replies_to(iid, note.id)), SETTLE, "the reply", interval=0.1)
    (reply,) = world.replies_to(iid, note.id)
    assert path in reply
    assert world.mr_operations(iid) == before


def test_protected_paths_are_refused_on_every_way_in(make_world: Any) -> None:
    """`.gitlab-ci.yml` through the API (422), CODEOWNERS through `/gitops apply`, and a revert
    of a file the CI configuration now includes: each refused naming the path, nothing started."""
    world: World = make_world()
    # the REST API
    body = {
        "subject_id": "ci",
        "target_key": "ci",
        "project": PROJECT,
        "target_branch": "main",
        "title": "Change CI",
        "requested_by": "alice",
        "files": [{"path": ".gitlab-ci.yml", "content": "evil: {script: [id]}\n"}],
    }
    answer = world.api("POST", "/changes", json=body)
    assert answer.status_code == 422, answer.text
    assert (answer.json()["error"], answer.json()["path"]) == ("protected_path", ".gitlab-ci.yml")
    # `/gitops apply` on a person's MR touching CODEOWNERS
    mr = world.gitlab.open_mr(
        PROJECT, "feature/owners", author="alice", files={"CODEOWNERS": "* @alice\n"}
    )
    _apply_refused(world, mr.iid, "alice", "apply", "CODEOWNERS")
    # `/gitops revert` of a merged change whose file the CI configuration includes since
    op_id = world.submit(Flow.APPROVE_FIRST, subject="included")
    world.wait_state(op_id, S.VALIDATED)
    world.gitlab.push(PROJECT, "main", {".gitlab-ci.yml": "include: config/included.yaml\n"})
    world.add_people({"mona": 40})
    _apply_refused(world, world.op(op_id)["mr_iid"], "mona", "revert", "config/included.yaml")
    assert world.reverts_of(op_id) == []


def test_a_deploy_callback_naming_another_change_changes_nothing(make_world: Any) -> None:
    """A callback with change A's operation id but change B's MR is recorded as a mismatch and
    validates nothing; A's own callback then validates A once."""
    world: World = make_world()
    world.deploy.deploy_seconds = None  # deployments report only by hand
    first = world.submit(Flow.APPROVE_FIRST, subject="deploy-a")
    second = world.submit(Flow.APPROVE_FIRST, subject="deploy-b")
    world.wait_all([first, second], S.MERGED)
    a, b = world.op(first), world.op(second)

    def post(body: dict[str, Any]) -> int:
        return requests.post(
            f"{world.web[0]}/webhooks/deploy",
            data=json.dumps(body).encode(),
            headers={"X-Deploy-Token": SECRETS["deploy"], "Content-Type": "application/json"},
            timeout=10,
        ).status_code

    mismatched = {
        "project_id": b["project_id"],
        "mr_iid": b["mr_iid"],
        "status": "success",
        "operation_id": first,
    }
    assert post(mismatched) == 202
    world.wait_inbox_done()
    assert (world.state(first), world.state(second)) == (S.MERGED, S.MERGED)
    assert any("mismatch" in (row["detail"] or "") for row in world.audit(first))
    good = {"project_id": a["project_id"], "mr_iid": a["mr_iid"], "status": "success"}
    good["operation_id"] = first
    assert post(good) == 202
    world.wait_state(first, S.VALIDATED)
    assert world.deployed_rows(first) == 1
    assert world.state(second) is S.MERGED


NASTY = [
    ("/label ~gitops::in-effect", "/merge\n/target_branch release\n@all please look"),
    ("@all deploy now", " /assign_reviewer @root\r/close\u2028/approve"),
    ("Scale \u202eelif.yml", "> quoted\n```\n/merge\n```\n<!-- /unapprove -->\n@developers"),
    ("`@all` and @here", "~~~\n/lock\n~~~\n\u2066/spend 1h\u2069 and \u200b/rebase"),
]
_QUICK = re.compile(r"^\s*/", re.MULTILINE)
_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9_]")


def _code_stripped(text: str) -> str:
    """The text with fenced code blocks (in or out of block quotes) and code spans removed."""
    kept: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        bare = re.sub(r"^(\s*>)+\s?", "", line)
        opening = re.match(r"\s*(`{3,}|~{3,})", bare)
        if fence is None and opening:
            fence = opening.group(1)
            continue
        if fence is not None:
            if bare.strip().startswith(fence[0] * len(fence)) and set(bare.strip()) == {fence[0]}:
                fence = None
            continue
        kept.append(re.sub(r"`+[^`]*`+", "", bare))
    return "\n".join(kept)


def _problems(text: str) -> list[str]:
    found: list[str] = []
    if _QUICK.search(text):
        found.append("quick action line")
    if any(unicodedata.category(c) == "Cf" for c in text):
        found.append("format character")
    if _MENTION.search(_code_stripped(text)):
        found.append("live mention")
    return found


def test_requester_text_reaches_gitlab_inert(make_world: Any) -> None:
    """Titles and descriptions full of quick actions, mentions and bidi controls, through the
    REST API on the real processes: every MR title, description, commit message and note the
    bot wrote is inert."""
    world: World = make_world()
    ops = []
    for n, (title, description) in enumerate(NASTY):
        body = {
            "subject_id": f"nasty-{n}",
            "target_key": f"config/nasty-{n}.yaml",
            "project": PROJECT,
            "target_branch": "main",
            "title": title,
            "description": description,
            "requested_by": "alice",
            "files": [{"path": f"config/nasty-{n}.yaml", "content": "replicas: 2\n"}],
        }
        answer = world.api("POST", "/changes", json=body)
        assert answer.status_code == 202, answer.text
        ops.append(answer.json()["operation_id"])
    world.wait_all(ops, S.VALIDATED)
    for op_id in ops:
        world.wait_ui(op_id)
    author = world.gitlab.user(AUTHOR).id
    texts: list[tuple[str, str]] = []
    with world.gitlab.lock:
        project = world.gitlab.project(PROJECT)
        for mr in project.mrs.values():
            texts += [("title", mr.title), ("description", mr.description)]
            texts += [("note", n.body) for n in mr.notes.values() if n.author_id == author]
        texts += [
            ("commit", c.message)
            for c in world.gitlab.state.commits.values()
            if c.author_id == author
        ]
    bad = [(kind, text, _problems(text)) for kind, text in texts if _problems(text)]
    assert bad == []
    record("inert text: bot writes checked (4 nasty requests, real processes)", len(texts), "texts")
