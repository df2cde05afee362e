"""The merge queue on the Procfile's processes (issue 14): a burst of 12 approve-first changes to
one branch of a fast-forward-only project, two workers; half-way one worker is SIGKILLed in the
middle of a step and Redis is flushed; the remaining worker finishes the burst (no worker is
started in its place).

Each change touches a file of its own, so nothing conflicts, but every merge moves the target
branch and puts every other open MR behind it: without a queue they would race (rebase, new
pipeline, lose, again). With the queue a change enters its branch's line when it moves into
MERGING, only the head rebases, waits for its pipeline and merges, and the next is driven when
the head leaves MERGING.

The kill is placed as in test_crashes.py: once HALF changes have merged, the next rebase GitLab
is asked for is applied and then held open (the double's "timeout" fault), the worker holding
that connection (found by its TCP port) is SIGKILLed there, and Redis loses everything the bot
kept in it (FLUSHDB of the database the processes use: the bot uses no other, and a FLUSHALL
would empty the databases of other test runs on the same server). The head whose worker died
is re-driven by the sweep once its step lease has expired (4 s with the e2e timings, then a
sweep every second) and follows the rebase GitLab had queued for it as its own (the merge step
notes `rebase_asked` before the call); everything else kept in Redis (drive jobs, scheduled
polls, the periodic jobs) is found again from the database. The changes waiting in line need
no re-check here: the next head is driven when this one merges, after the flush. (Had that
drive been lost, the next head would wait for its own deadline in line: two sweep intervals,
bot/app/queue.py queue_recheck.)

What is checked: every change VALIDATED; one merge call per MR; merges in the order the changes
entered MERGING (their audit rows: queue order); at most one rebase and two MR pipelines per MR;
no rebase, approval or merge call for an MR before the MR ahead of it merged (only the head
acts); and the branch holding all twelve files.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest

from bot.core.states import BindingState as S
from bot.core.states import Flow
from sim.gitlab.faults import Call
from tests.e2e.cluster import wait_until
from tests.e2e.figures import record
from tests.e2e.world import PROJECT, World

pytestmark = pytest.mark.e2e

#: Changes in the burst.
N = 12
#: Merged changes after which the next rebase call is held and its worker killed.
HALF = 5
#: How long the whole burst may take from submission to the last VALIDATED. Each head
#: rebases, waits for its pipeline and merges in about 3 s; the kill costs a step lease (4 s
#: with the e2e timings) and a sweep interval (1 s): about 40 s on 2 busy cores.
BURST = 120.0


def mr_calls(world: World, iid: int) -> Iterator[tuple[int, Call]]:
    """(position in the double's record, call) of every call about MR `iid`'s own path."""
    prefix = f"/projects/{world.gitlab.project(PROJECT).id}/merge_requests/{iid}"
    for n, call in enumerate(list(world.gitlab.calls)):
        if call.path == prefix or call.path.startswith(prefix + "/"):
            yield n, call


def acts(world: World, iid: int) -> list[tuple[int, Call]]:
    """The calls that act on MR `iid` as only a head may: approve, rebase, merge."""
    return [
        (n, c)
        for n, c in mr_calls(world, iid)
        if (c.method, c.path.rsplit("/", 1)[-1])
        in {("POST", "approve"), ("PUT", "rebase"), ("PUT", "merge")}
    ]


def entered_merging(world: World, op_id: str) -> list[dict[str, Any]]:
    """The operation's audit rows of a move into MERGING from another state."""
    return [
        r
        for r in world.audit(op_id)
        if r["version"] > 0 and r["to_state"] == "MERGING" and r["from_state"] != "MERGING"
    ]


def test_a_burst_of_12_merges_in_queue_order_through_a_kill_and_a_flush(world: World) -> None:
    """12 changes at once, ff-only: one worker SIGKILLed mid-rebase-call and Redis flushed after
    HALF merges; all VALIDATED, merged once each, in the order they entered the queue."""
    world.configure_project(merge_method="ff")
    world.gitlab.rebase_auto_after = 0  # GitLab's rebase is done by the first read after it
    # (tests/e2e/names.py FLAGS poll the covered waits every second too: the double finishes
    # a rebase only when the MR is read, so no push event comes before the bot's first look)
    started = time.monotonic()
    ops = [
        world.submit(Flow.APPROVE_FIRST, subject=f"svc-{k}", content=f"replicas: {k}\n", web=k % 2)
        for k in range(1, N + 1)
    ]
    project = world.gitlab.project(PROJECT)

    def merged() -> int:
        with world.gitlab.lock:
            return sum(m.state == "merged" for m in project.mrs.values())

    wait_until(lambda: merged() >= HALF, BURST, f"{HALF} merges", interval=0.1)
    world.gitlab.hang_seconds = 30
    world.gitlab.fail_next(1, "timeout", methods="PUT", path_endswith="/rebase", apply=True)
    hung = wait_until(world.gitlab.hung_calls, 30, "the held rebase call", interval=0.05)
    assert isinstance(hung, list)
    port = hung[0].remote_port
    assert port is not None
    name = wait_until(lambda: world.cluster.pid_of_port(port), 5, f"the owner of port {port}")
    assert isinstance(name, str)
    assert name.startswith("worker-"), name
    merged_at_kill = merged()
    killed_at = world.cluster.kill(name)
    world.redis.flushdb()
    world.gitlab.release_hung()
    held_iid = int(hung[0].path.split("/merge_requests/")[1].split("/")[0])
    held_op = next(op for op in ops if world.op(op)["mr_iid"] == held_iid)
    in_flight = {op: world.state(op) for op in ops}

    world.wait_state(held_op, S.MERGED, timeout=BURST)
    record("queue burst: SIGKILL + FLUSHDB -> held head MERGED", time.monotonic() - killed_at)
    world.wait_all(ops, S.VALIDATED, timeout=BURST - (time.monotonic() - started))
    record("queue burst: SIGKILL + FLUSHDB -> all 12 VALIDATED", time.monotonic() - killed_at)
    record(f"queue burst: submit -> all {N} VALIDATED", time.monotonic() - started)
    assert merged_at_kill >= HALF
    waiting = sum(state is S.MERGING for state in in_flight.values()) - 1  # but the held head
    assert waiting >= 1, in_flight
    record("queue burst: changes waiting in line at the kill", waiting, "changes")

    iids = {op: world.op(op)["mr_iid"] for op in ops}
    # queue order: when each entered MERGING (once each), as its audit row says
    entries = {op: entered_merging(world, op) for op in ops}
    assert all(len(rows) == 1 for rows in entries.values()), {
        op: world.describe(op) for op, rows in entries.items() if len(rows) != 1
    }
    queue_order = sorted(ops, key=lambda op: (entries[op][0]["created_at"], op))
    # merge order: GitLab's record of the merges it answered, and the MERGED audit rows
    merge_calls = world.gitlab.calls_matching("PUT", path_endswith="/merge", status=200)
    by_iid = {iid: op for op, iid in iids.items()}
    merge_order = [by_iid[int(c.path.rsplit("/", 2)[-2])] for c in merge_calls]
    assert merge_order == queue_order, (merge_order, queue_order)
    merged_rows = {
        op: next(r for r in world.audit(op) if r["version"] > 0 and r["to_state"] == "MERGED")
        for op in ops
    }
    assert sorted(ops, key=lambda op: merged_rows[op]["created_at"]) == queue_order

    for op in ops:
        iid = iids[op]
        calls = [c for _, c in mr_calls(world, iid)]
        merges = [c for c in calls if c.method == "PUT" and c.path.endswith("/merge")]
        rebases = [c for c in calls if c.method == "PUT" and c.path.endswith("/rebase")]
        with world.gitlab.lock:
            pipelines = [p for p in project.pipelines.values() if p.mr_iid == iid]
        assert [c.status for c in merges] == [200], (op, merges)
        assert sum(c.status == 202 for c in rebases) <= 1, (op, rebases)
        assert len(pipelines) <= 2, (op, [(p.id, p.sha, p.status) for p in pipelines])
        assert world.mr(op).state == "merged"
        assert world.deployed_rows(op) == 1
        effects = world.effects(op)
        one_each = ("mrs", "merges", "comments", "approval_requests")
        assert {k: effects[k] for k in one_each} == dict.fromkeys(one_each, 1), (op, effects)
        k = ops.index(op) + 1
        assert world.gitlab.file(PROJECT, f"config/svc-{k}.yaml") == f"replicas: {k}\n", k

    # only the head acts: nothing approves, rebases or merges an MR before the one ahead merged
    for ahead, behind in pairwise(queue_order):
        merged_ahead = next(n for n, c in acts(world, iids[ahead]) if c.path.endswith("/merge"))
        first = min(n for n, _ in acts(world, iids[behind]))
        assert first > merged_ahead, (ahead, behind)

    record(
        "queue burst: rebases per change",
        world.gitlab.count("PUT", path_endswith="/rebase", status=202) / N,
        "rebases",
    )
    with world.gitlab.lock:
        mr_pipelines = sum(p.mr_iid is not None for p in project.pipelines.values())
    record("queue burst: MR pipelines per change", mr_pipelines / N, "pipelines")
    record("queue burst: GitLab calls per change", len(world.gitlab.calls) / N, "calls")
