"""`gitops-bot queue` (every merge queue) and `gitops-bot queue promote` against the suite's
database, through click's CliRunner with GITOPS_* set."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.engine import Engine

from bot.core.events import Event as E
from bot.core.request import TransitionRequest
from bot.core.states import BindingState as S
from bot.store import queue as line
from bot.store.fire import fire
from bot.store.models import AUDIT, utcnow
from bot.store.submit import submit
from bot.store.sweep import overdue
from tests.api import FakeQueue
from tests.builders import (
    OUTBOX,
    binding_state,
    count,
    make_operation,
    make_request,
    merge_line,
    operation,
)
from tests.cli import REDIS_URL, Run

_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def order(db: Engine, project: str = "platform/config", branch: str = "main") -> list[str]:
    """The line's operation ids, head first."""
    return [entry.operation_id for entry in line.line(db, project, branch)]


def audit_rows(db: Engine, op_id: str) -> list[tuple[object, ...]]:
    """The operation's audit rows: event, source, actor, version, detail."""
    with db.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                select(
                    AUDIT.c.event, AUDIT.c.source, AUDIT.c.actor, AUDIT.c.version, AUDIT.c.detail
                )
                .where(AUDIT.c.operation_id == op_id)
                .order_by(AUDIT.c.id)
            )
        ]


# -- the list -------------------------------------------------------------------------------------


def test_an_empty_queue_says_so(run: Run) -> None:
    """No change merging: one sentence, and an empty list for scripts."""
    text = run("queue")
    data = run("queue", "--json")

    assert text.exit_code == 0, text.output
    assert text.output == "the merge queues are empty: no change is waiting to merge\n"
    assert json.loads(data.output) == []


def test_queue_lists_each_line_head_first(db: Engine, run: Run) -> None:
    """Per project and branch a header, then position, operation, MR, step, entry time; the
    change that merges next is marked, a paused one says its pipeline is pending."""
    first, second, third = merge_line(db, 3)
    fire(db, TransitionRequest(first, E.PIPELINE_TIMED_OUT))  # paused: the next goes ahead
    [release] = merge_line(db, 1, first_mr=201, target_branch="release/1.x")

    result = run("queue")

    assert result.exit_code == 0, result.output
    blocks = result.output.rstrip("\n").split("\n\n")
    assert len(blocks) == 2
    main, other = (block.splitlines() for block in blocks)
    assert main[0] == "platform/config -> main: 3 in line"
    assert main[1].split() == ["POS", "OPERATION", "MR", "STEP", "ENTERED", "(UTC)", "NOTE"]
    assert re.fullmatch(
        rf"1 +{first} +!101 +HANDLE_PIPELINE_PENDING +{_TIME} +paused \(pipeline pending\)",
        main[2],
    )
    assert re.fullmatch(rf"2 +{second} +!102 +HANDLE_STARTED +{_TIME} +merges next", main[3])
    assert re.fullmatch(rf"3 +{third} +!103 +HANDLE_STARTED +{_TIME}", main[4])
    assert other[0] == "platform/config -> release/1.x: 1 in line"
    assert re.fullmatch(rf"1 +{release} +!201 +HANDLE_STARTED +{_TIME} +merges next", other[2])


def test_queue_json_for_scripts(db: Engine, run: Run) -> None:
    """`--json`: one object per line with the change that merges next and each change."""
    first, second = merge_line(db, 2)
    fire(db, TransitionRequest(first, E.PIPELINE_TIMED_OUT))

    result = run("queue", "--json")

    assert result.exit_code == 0, result.output
    [main] = json.loads(result.output)
    assert {k: v for k, v in main.items() if k != "changes"} == {
        "project": "platform/config",
        "target_branch": "main",
        "head": second,
    }
    changes = main["changes"]
    assert [c["operation_id"] for c in changes] == [first, second]
    assert [(c["position"], c["mr_iid"], c["paused"]) for c in changes] == [
        (1, 101, True),
        (2, 102, False),
    ]
    assert changes[0]["step"] == "HANDLE_PIPELINE_PENDING"
    assert changes[0]["step_code"] == 10501
    assert changes[1]["mr_url"].endswith("/merge_requests/102")
    assert changes[1]["title"].startswith("Change ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", changes[0]["entered_at"])


def test_changes_leave_the_list_when_they_leave_merging(db: Engine, run: Run) -> None:
    """A merged or cancelled change is in no line any more."""
    merged, cancelled, waiting = merge_line(db, 3)
    fire(db, TransitionRequest(merged, E.MERGED, changes={"merge_commit_sha": "f" * 40}))
    fire(db, TransitionRequest(cancelled, E.CANCEL))

    result = run("queue")

    assert merged not in result.output
    assert cancelled not in result.output
    assert re.search(rf"^1 +{waiting} ", result.output, re.MULTILINE)


# -- promote --------------------------------------------------------------------------------------


def test_promote_moves_it_to_the_front_for_the_next_sweep(db: Engine, run: Run) -> None:
    """Embedded default: the third goes first, its deadline is now (the running bot's sweep
    drives it), the promotion is in its audit log with the actor, and the status comments of
    it and of the change that was the driven head are queued; the state does not move."""
    first, second, third = merge_line(db, 3)
    assert line.take_turn(db, "platform/config", "main", utcnow()) == first  # driven now
    version = operation(db, third)["version"]
    comments = {op: count(db, OUTBOX, op) for op in (first, second, third)}

    result = run("queue", "promote", third, "--actor", "cli:olivia")

    assert result.exit_code == 0, result.output
    assert result.output == (
        f"promoted: {third} is now first in line for main: merging next (3 in line); "
        "no GITOPS_REDIS_URL: the running bot's next sweep drives it\n"
    )
    assert order(db) == [third, first, second]
    assert binding_state(db, third) is S.MERGING
    assert operation(db, third)["version"] == version
    assert third in [row[0] for row in overdue(db, utcnow() + timedelta(seconds=1), 600)]
    assert audit_rows(db, third)[-1] == (
        "promote",
        "operator",
        "cli:olivia",
        0,
        "promoted to the front of main's merge queue",
    )
    assert count(db, OUTBOX, third) == comments[third] + 1
    assert count(db, OUTBOX, first) == comments[first] + 1  # no longer "merging next"
    assert count(db, OUTBOX, second) == comments[second]
    shown = run("show", third).output
    assert "moved to the front of its merge queue" in shown


def test_promote_with_redis_drives_it_at_once(db: Engine, run: Run, queue: FakeQueue) -> None:
    """With a queue that reaches the bot, the promoted change is driven at once."""
    _, second = merge_line(db, 2)

    result = run("queue", "promote", second, GITOPS_REDIS_URL=REDIS_URL)

    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("(2 in line); drive job queued")
    assert queue.drives() == [second]
    assert order(db)[0] == second


def test_promoting_a_paused_change_lets_the_next_merge(
    db: Engine, run: Run, queue: FakeQueue
) -> None:
    """A change waiting on its pipeline goes to the front but does not hold up the line: the
    next one is driven, and the output says so."""
    first, second = merge_line(db, 2)
    fire(db, TransitionRequest(second, E.PIPELINE_TIMED_OUT))

    result = run("queue", "promote", second, GITOPS_REDIS_URL=REDIS_URL)

    assert result.exit_code == 0, result.output
    assert result.output == (
        f"promoted: {second} is now first in line for main, waiting for its pipeline; the "
        f"next change goes ahead (2 in line); {first} merges next; "
        "drive job queued\n"
    )
    assert order(db) == [second, first]
    assert queue.drives() == [first]


def test_promote_of_a_change_in_no_queue_is_refused(db: Engine, run: Run) -> None:
    """A change that is not merging: exit 1 saying where it stands; nothing written."""
    op_id = make_operation(db, S.APPROVAL_SENT)
    rows, outbox = count(db, AUDIT, op_id), count(db, OUTBOX, op_id)

    result = run("queue", "promote", op_id)

    assert result.exit_code == 1
    assert f"cannot promote {op_id}: it is in no merge queue (it is APPROVAL_SENT," in result.output
    assert "only while it is MERGING" in result.output
    assert (count(db, AUDIT, op_id), count(db, OUTBOX, op_id)) == (rows, outbox)


def test_promote_of_an_unknown_or_replaced_change_is_refused(db: Engine, run: Run) -> None:
    """An unknown id, or a change a newer request replaced: exit 1, the line unchanged."""
    waiting = merge_line(db, 2)
    old = make_operation(db, S.REJECTED, subject_id="svc-again")
    submit(db, make_request(subject_id="svc-again"))

    unknown = run("queue", "promote", "00000000-0000-0000-0000-000000000000")
    replaced = run("queue", "promote", old)

    assert unknown.exit_code == 1
    assert "no operation has the id '00000000-0000-0000-0000-000000000000'" in unknown.output
    assert replaced.exit_code == 1
    assert "a newer request for the same subject and target replaced it" in replaced.output
    assert order(db) == waiting


def test_show_gives_the_place_in_the_line(db: Engine, run: Run) -> None:
    """`show` of a merging change says where it stands; `--json` has the API's `queue`."""
    _, second = merge_line(db, 2)

    text = run("show", second).output
    data = json.loads(run("show", second, "--json").output)

    assert "Merge queue   2nd in line for main (1 ahead); 2 in line" in text
    assert data["queue"] == {
        "target_branch": "main",
        "position": 2,
        "size": 2,
        "head": False,
        "paused": False,
    }
    assert json.loads(run("show", make_operation(db, S.MERGED), "--json").output)["queue"] is None


def test_promote_when_every_change_is_paused_drives_nobody(db: Engine, run: Run) -> None:
    """With every change in the line waiting on its pipeline there is no head to drive."""
    first, second = merge_line(db, 2)
    for op_id in (first, second):
        fire(db, TransitionRequest(op_id, E.PIPELINE_TIMED_OUT))
    deadline = operation(db, first)["deadline_at"]

    result = run("queue", "promote", second)

    assert result.exit_code == 0, result.output
    assert result.output.endswith(
        "(2 in line); every change in the line waits for its pipeline: the first to pass merges\n"
    )
    assert order(db) == [second, first]
    assert operation(db, first)["deadline_at"] == deadline
