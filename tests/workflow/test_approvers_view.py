"""Approvers see everything that merges (the issue's attacks on the approval request): a change
of 55 files whose 55th adds a backdoor image is listed whole, with the preview's cover said
outright; a requester's description imitating the bot's preview comes after the bot's summary,
marked as theirs; bidi overrides and carriage returns reach the approval system only shown."""

from __future__ import annotations

from bot.core.inert import hidden_in
from bot.core.states import BindingState as S
from bot.render.change_text import REQUESTER_HEADING
from tests.workflow.harness import Bot
from tests.workflow.test_preview_checks import status_note

BACKDOOR = "image: registry.evil.example/backdoor:latest\n"


def approve_first(bot: Bot, **kw: object) -> dict[str, str]:
    """An approve-first change asked for approval; the request the approval system got."""
    op_id = bot.request(**kw)  # type: ignore[arg-type]
    bot.settle()
    assert bot.state(op_id) is S.APPROVAL_SENT
    [submitted] = bot.approvals.submitted
    return dict(submitted)


def test_the_55th_file_is_listed_and_the_cut_is_said(bot: Bot) -> None:
    """55 files, the last one a backdoor: every path is in the request, the preview says it
    counts and diffs the first 50 of 55, and the backdoor's path is there to be seen."""
    files = [{"path": f"config/svc-{n:02}.yaml", "content": f"replicas: {n}\n"} for n in range(54)]
    files.append({"path": "config/zz-image.yaml", "content": BACKDOOR})
    request = approve_first(bot, files=files)
    description = request["description"]
    lines = set(description.splitlines())
    for spec in files:
        assert f"- write {spec['path']}" in lines, spec["path"]
    assert "Files (55, every one listed):" in description
    assert "- write config/zz-image.yaml" in description
    assert "and 5 more" not in description
    assert "55 files: line counts and diff for the first 50, the other 5 listed without" in (
        description
    )


def test_the_bots_summary_comes_first_and_an_imitation_stays_the_requesters(bot: Bot) -> None:
    """A description that imitates the bot's preview (claiming one harmless file) comes last,
    under its own heading, each line marked `| `: nothing before the bot's own summary."""
    fake = "Target: platform/config branch main\nFiles (1):\n- update config/readme.md"
    request = approve_first(bot, description=fake)
    description = request["description"]
    assert description.startswith("Target: platform/config branch main\nFiles (1, every one")
    mine, theirs = description.split(REQUESTER_HEADING)
    assert "config/prod.yaml" in mine
    assert theirs.strip("\n").splitlines() == [f"| {line}" for line in fake.splitlines()]


def test_bidi_and_carriage_returns_never_reach_the_approval_system(bot: Bot) -> None:
    """U+202E, U+2066 and CR in the title, the description and the applicant are shown as
    [U+XXXX]; nothing hidden is sent."""
    request = approve_first(
        bot,
        title="Scale \u202eexe.evil\u202c svc",
        description="ok\r\nfine\u2066 hidden\u2069\rlast",
        requested_by="ali\u202ece",
    )
    for field in ("title", "description", "applicant"):
        assert hidden_in(request[field]) == [], field
    assert "[U+202E]" in request["title"]
    assert "[U+2066]" in request["description"]
    assert "[U+202E]" in request["applicant"]


def test_the_status_comment_says_its_preview_is_partial(bot: Bot) -> None:
    """The MR's status comment lists all 55 files and says which have counts and diff."""
    files = [{"path": f"config/svc-{n:02}.yaml", "content": f"replicas: {n}\n"} for n in range(55)]
    op_id = bot.request(files=files)
    bot.settle()
    bot.approve(op_id)
    bot.settle()
    note = status_note(bot, op_id)
    assert "_Partial preview: 55 files: line counts and diff for the first 50, the other 5" in note
    assert note.count("config/svc-") >= 55
