"""Bursts of changes to one branch (issue 14): GitLab calls, pipelines and rebases per change,
and simulated wall time against the ideal serial time, against the GitLab double.

Usage: .venv/bin/python -m tests.bench.bench_queue [--quick] [--sizes 1 4 12 32]
       [--pipeline-seconds 300 60] [--rebase-seconds 10] [--kinds]

`--quick` runs bursts of 1 and 4 only. By default each size runs with a 300 s pipeline and
again with a 60 s one: after a rebase today's bot follows the new pipeline only as long as its
rebase polls last (about 1.5-3 minutes), so with 300 s the changes that had to rebase never
finish, and 60 s shows the race the issue describes.

The whole bot runs in this process (tests/workflow/harness.py: the real app and jobs, SQLite,
the in-process queue on fakeredis) against the GitLab double, on a simulated clock (freezegun):
nothing sleeps, the clock jumps to the next thing due. Changes are submitted through the REST
API with policy files on (the default), so the read of `.gitops/bot.yml` at submission counts.
The project merges by fast-forward; every MR pipeline succeeds `--pipeline-seconds` after it
starts and every rebase GitLab queues completes `--rebase-seconds` after it was asked (the
double's `pipeline_seconds` and `rebase_seconds`); GitLab sends its webhooks (MR, pipeline, note
events) to the bot as they happen. A merge takes no time in the double, so the ideal serial time
of n changes is n x (rebase + pipeline + 0). The approval system approves each change as soon as
it is submitted (approve-first flow), and the deployment signal comes as soon as it merged. The
periodic jobs run at their intervals on the same clock: the outbox (status comments, labels;
their GitLab calls count) and the sweep; the hooks check and reconcile do not run (one call per
project per interval, not per change; nothing is left for reconcile).

Each burst submits n changes at once, each to its own file, all to `main`, after one warm-up
change (the first calls of each account) that is not counted, and runs until every change is
VALIDATED or failed, or nothing moved for an hour of simulated time, or sooner once nothing
that could move them is running, scheduled or has a deadline (then the unfinished are reported
with their state, step and last audit row).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fakeredis
import responses
from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory, StepTickTimeFactory, TickingDateTimeFactory
from rq.registry import ScheduledJobRegistry
from sqlalchemy import select

from bot.core.states import BindingState, Flow, Step
from bot.queueing import OUTBOX_JOB, SWEEP_JOB
from bot.store.engine import make_engine
from bot.store.migrate import upgrade
from bot.store.models import AUDIT, BINDINGS, OPERATIONS
from tests.bench import bench_calls
from tests.workflow.harness import PROJECT, PUBLIC, SECRETS, Bot

#: Where the simulated clock starts.
START = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)
#: Stop when no change moved for this long (simulated seconds): what is left is stuck. Sooner
#: (two sweeps) when nothing is running or scheduled that could move them.
STALL_SECONDS = 3600
#: Pipeline durations measured by default (simulated seconds): a realistic one, and one short
#: enough for today's wait after a rebase; the rebase's duration.
DEFAULT_PIPELINES = (300.0, 60.0)
DEFAULT_REBASE = 10.0
SIZES = (1, 4, 12, 32)
#: The figures of the code before the merge queue, kept to compare later runs with
#: (written by `--write-baseline`).
BASELINE = Path(__file__).with_name("queue_baseline.md")
QUICK_SIZES = (1, 4)
#: The issue's targets.
TARGET_CALLS = 25
TARGET_PIPELINES = 2
TARGET_REBASES = 1
TARGET_RATIO = 1.2
#: Burst sizes whose calls per change the target applies to (the issue: "at 12 and at 32").
CALL_TARGET_SIZES = (12, 32)
DONE = frozenset(
    {
        BindingState.VALIDATED,
        BindingState.CREATE_FAILED,
        BindingState.HANDLE_FAILED,
        BindingState.REJECTED,
        BindingState.CLOSED,
    }
)
Clock = FrozenDateTimeFactory | StepTickTimeFactory | TickingDateTimeFactory


@dataclass
class Burst:
    """What one burst of n changes cost and how it ended."""

    n: int
    pipeline_seconds: float
    rebase_seconds: float
    calls: int = 0
    pipelines: int = 0
    rebases: int = 0
    merges: int = 0
    validated: int = 0
    #: operation -> "STATE step" of each change that did not end VALIDATED
    failed: dict[str, str] = field(default_factory=dict)
    unfinished: dict[str, str] = field(default_factory=dict)
    #: why each change that did not end VALIDATED is where it is: its last audit row
    why: dict[str, str] = field(default_factory=dict)
    #: simulated seconds from submission to the last change's end (to the last one that ended,
    #: when some never did)
    wall_seconds: float = 0.0
    mr_reads: int = 0
    #: operation -> merges of its MR GitLab answered 200
    merged: dict[str, int] = field(default_factory=dict)
    real_seconds: float = 0.0
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def ideal_seconds(self) -> float:
        """n x (rebase + pipeline + merge); a merge takes no time in the double."""
        return self.n * (self.rebase_seconds + self.pipeline_seconds)

    @property
    def ratio(self) -> float:
        """Simulated wall time over the ideal serial time."""
        return self.wall_seconds / self.ideal_seconds if self.ideal_seconds else 0.0

    def per_change(self, total: int) -> float:
        """A total divided among the burst's changes."""
        return total / self.n


class Simulation:
    """The bot and the double on one simulated clock, driven until nothing is left to do."""

    def __init__(self, bot: Bot, clock: Clock) -> None:
        self.bot = bot
        self.clock = clock
        self.registry = ScheduledJobRegistry(queue=bot.worker.queue)  # type: ignore[no-untyped-call]
        settings = bot.settings
        self.periodic = {
            OUTBOX_JOB: (settings.outbox_interval, START),
            SWEEP_JOB: (settings.sweep_interval, START),
        }
        self.sweep_interval = settings.sweep_interval
        self.approved: set[str] = set()
        self.deployed: set[str] = set()

    def now(self) -> datetime:
        """The simulated time."""
        return datetime.now(UTC)

    def states(self, ops: Sequence[str]) -> dict[str, tuple[BindingState, int | None]]:
        """(binding state, step) of each operation."""
        with self.bot.services.engine.connect() as conn:
            rows = conn.execute(
                select(OPERATIONS.c.id, BINDINGS.c.state, OPERATIONS.c.step)
                .join(BINDINGS, OPERATIONS.c.binding_id == BINDINGS.c.id)
                .where(OPERATIONS.c.id.in_(list(ops)))
            ).all()
        return {row.id: (BindingState(row.state), row.step) for row in rows}

    def deliver(self) -> int:
        """Posts every webhook GitLab queued to the bot; how many."""
        sent = self.bot.gitlab.take_outgoing()
        for delivery in sent:
            answer = self.bot.client.post(
                "/webhooks/gitlab", data=delivery.body, headers=delivery.headers
            )
            assert answer.status_code < 300, (answer.status_code, answer.data)
        return len(sent)

    def people(self, states: dict[str, tuple[BindingState, int | None]]) -> int:
        """The approval system approves what was submitted; the deployment reports merges."""
        moved = 0
        for op_id, (state, _) in states.items():
            if state is BindingState.APPROVAL_SENT and op_id not in self.approved:
                self.approved.add(op_id)
                assert self.bot.approve(op_id) < 300
                moved += 1
            elif state is BindingState.MERGED and op_id not in self.deployed:
                self.deployed.add(op_id)
                assert self.bot.deployed(op_id) < 300
                moved += 1
        return moved

    def periodic_due(self) -> None:
        """Queues each periodic job whose time has come, and its next time."""
        for func, (interval, due) in list(self.periodic.items()):
            if due <= self.now():
                self.bot.services.queue.enqueue(func, job_id=f"bench:{func}")
                self.periodic[func] = (interval, due + timedelta(seconds=interval))

    def idle(self, ops: Sequence[str]) -> bool:
        """Nothing can move the operations any more: no GitLab work running, no delayed job, no
        deadline for the sweep on an unfinished one (only a person or an operator could)."""
        if self.bot.gitlab.next_due() is not None or self.bot.services.redis.zcard(
            self.registry.key
        ):
            return False
        with self.bot.services.engine.connect() as conn:
            ahead = conn.execute(
                select(OPERATIONS.c.id)
                .join(BINDINGS, OPERATIONS.c.binding_id == BINDINGS.c.id)
                .where(
                    OPERATIONS.c.id.in_(list(ops)),
                    OPERATIONS.c.deadline_at.is_not(None),
                    BINDINGS.c.state.not_in([state.value for state in DONE]),
                )
                .limit(1)
            ).first()
        return ahead is None

    def next_event(self) -> datetime:
        """When the next thing is due: GitLab's timed work, a delayed job, a periodic job."""
        times = [due for _, due in self.periodic.values()]
        gitlab_due = self.bot.gitlab.next_due()
        if gitlab_due is not None:
            times.append(gitlab_due)
        first = self.bot.services.redis.zrange(self.registry.key, 0, 0, withscores=True)
        if first:
            times.append(datetime.fromtimestamp(float(first[0][1]), UTC))
        return max(min(times), self.now())

    def run(self, ops: Sequence[str]) -> dict[str, datetime]:
        """Drives everything until each operation is done or nothing moved for STALL_SECONDS;
        when each finished."""
        finished: dict[str, datetime] = {}
        last: dict[str, tuple[BindingState, int | None]] = {}
        last_move = self.now()
        while True:
            self.bot.gitlab.run_due()
            self.periodic_due()
            while True:
                delivered = self.deliver()
                self.bot.settle()
                states = self.states(ops)
                if not delivered and not self.people(states):
                    break
            if states != last:
                last, last_move = states, self.now()
            for op_id, (state, _) in states.items():
                if state in DONE and op_id not in finished:
                    finished[op_id] = self.now()
            still = self.now() - last_move
            if (
                len(finished) == len(ops)
                or still > timedelta(seconds=STALL_SECONDS)
                or (self.idle(ops) and still > timedelta(seconds=2 * self.sweep_interval))
            ):
                return finished
            self.clock.move_to(self.next_event())


def burst(n: int, pipeline_seconds: float, rebase_seconds: float) -> Burst:
    """Submits n changes to main at once and drives them to their end; what it cost."""
    result = Burst(n, pipeline_seconds, rebase_seconds)
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        responses.RequestsMock(assert_all_requests_are_fired=False) as rsps,
        freeze_time(START) as clock,
    ):
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}")
        upgrade(engine)
        bot = Bot(engine, fakeredis.FakeRedis(), rsps)  # policy files on, as by default
        try:
            measure_burst(bot, clock, result)
        finally:
            bot.close()
            engine.dispose()
    result.real_seconds = time.perf_counter() - started
    return result


def setup(bot: Bot, n: int, pipeline_seconds: float, rebase_seconds: float) -> None:
    """Fast-forward merges, timed pipelines and rebases, the bot's hook, one file per change."""
    gitlab = bot.gitlab
    gitlab.project(PROJECT).merge_method = "ff"
    gitlab.pipeline_seconds = pipeline_seconds
    gitlab.rebase_seconds = rebase_seconds
    gitlab.add_hook(PROJECT, f"{PUBLIC}/webhooks/gitlab", token=SECRETS["webhook"])
    gitlab.push(
        PROJECT,
        "main",
        {path(i): "replicas: 1\n" for i in range(-1, n)},
        author="gitops-bot",
        message="Seed one file per change",
    )
    gitlab.take_outgoing()


def kind(method: str, call_path: str) -> str:
    """A call's kind (bench_calls.kind), the bot's branch names and the changes' files folded."""
    named = bench_calls.kind(method, call_path)
    named = re.sub(r"gitops/[0-9a-f-]{36}", "gitops/{branch}", named)
    return re.sub(
        r"(?:config/)?repository/files/config/svc-\d+\.yaml", "repository/files/{file}", named
    )


def path(i: int) -> str:
    """The file change i edits (-1: the warm-up's)."""
    return f"config/svc-{i}.yaml" if i >= 0 else "config/warm-up.yaml"


def submit(bot: Bot, i: int) -> str:
    """Change i, approve-first, to main, through the REST API (the policy file's read at
    submission counted); the operation id."""
    return bench_calls.submit_api(
        bot, Flow.APPROVE_FIRST, f"svc-{i}", path=path(i), title=f"Scale svc-{i}"
    )


def measure_burst(bot: Bot, clock: Clock, result: Burst) -> None:
    """The warm-up change, then the burst; fills `result`."""
    setup(bot, result.n, result.pipeline_seconds, result.rebase_seconds)
    sim = Simulation(bot, clock)
    warm = submit(bot, -1)
    assert sim.states([warm]).get(warm) is not None
    sim.run([warm])
    assert sim.states([warm])[warm][0] is BindingState.VALIDATED, sim.states([warm])
    gitlab = bot.gitlab
    first_call = len(gitlab.calls)
    first_pipeline = max(gitlab.project(PROJECT).pipelines, default=0)
    first_mr = max(gitlab.project(PROJECT).mrs, default=0)
    begun = sim.now()
    ops = [submit(bot, i) for i in range(result.n)]
    finished = sim.run(ops)
    result.wall_seconds = (max(finished.values(), default=begun) - begun).total_seconds()
    calls = gitlab.calls[first_call:]
    result.calls = len(calls)
    result.kinds = Counter(kind(c.method, c.path) for c in calls)
    result.mr_reads = sum(n for k, n in result.kinds.items() if k == "GET merge_requests/{id}")
    result.rebases = sum(
        1 for c in calls if c.method == "PUT" and c.path.endswith("/rebase") and c.status == 202
    )
    project = gitlab.project(PROJECT)
    result.pipelines = sum(1 for pid in project.pipelines if pid > first_pipeline)
    result.merges = sum(
        1 for iid, mr in project.mrs.items() if iid > first_mr and mr.state == "merged"
    )
    with bot.services.engine.connect() as conn:
        iids = dict(
            conn.execute(
                select(OPERATIONS.c.id, OPERATIONS.c.mr_iid).where(OPERATIONS.c.id.in_(ops))
            ).all()
        )
    for op_id in ops:
        ending = f"/merge_requests/{iids[op_id]}/merge"
        result.merged[op_id] = sum(
            1 for c in calls if c.method == "PUT" and c.path.endswith(ending) and c.status == 200
        )
    for op_id, (state, step) in sim.states(ops).items():
        label = f"{state.value} {Step(step).name if step else '-'}"
        if state is BindingState.VALIDATED:
            result.validated += 1
            continue
        if state in DONE:
            result.failed[op_id] = label
        else:
            result.unfinished[op_id] = label
        result.why[op_id] = last_audit(bot, op_id)


def last_audit(bot: Bot, op_id: str) -> str:
    """The operation's last audit row: event, step and detail."""
    with bot.services.engine.connect() as conn:
        row = conn.execute(
            select(AUDIT).where(AUDIT.c.operation_id == op_id).order_by(AUDIT.c.id.desc()).limit(1)
        ).one()
    step = Step(row.step).name if row.step else "-"
    return f"{row.event} ({step}): {row.detail or '-'}"


HEADER = (
    "| pipeline | n | finished | merges "
    f"| GitLab calls / change (<= {TARGET_CALLS} at 12, 32) "
    f"| pipelines / change (<= {TARGET_PIPELINES}) "
    f"| rebases / change (<= {TARGET_REBASES}) "
    f"| wall / ideal serial (<= {TARGET_RATIO}x) "
    "| MR reads / change | real time |"
)


def met(value: str, ok: bool | None) -> str:
    """A figure and whether it meets its target (None: no target at this size)."""
    return value if ok is None else f"{value} {'yes' if ok else '**no**'}"


def row(r: Burst) -> str:
    """One burst's figures beside their targets, as a markdown table row."""
    calls = r.per_change(r.calls)
    pipelines = r.per_change(r.pipelines)
    rebases = r.per_change(r.rebases)
    ends = f"{r.validated}/{r.n} VALIDATED"
    if r.failed:
        ends += f", {len(r.failed)} failed ({', '.join(sorted(set(r.failed.values())))})"
    if r.unfinished:
        ends += f", {len(r.unfinished)} stuck ({', '.join(sorted(set(r.unfinished.values())))})"
    if r.validated == r.n:
        wall = f"{r.wall_seconds:.0f} s / {r.ideal_seconds:.0f} s = {r.ratio:.2f}x"
    else:
        wall = f"never ({r.ideal_seconds:.0f} s ideal)"
    cells = [
        f"{r.pipeline_seconds:.0f} s",
        str(r.n),
        met(ends, r.validated == r.n),
        met(str(r.merges), r.merges == r.n),
        met(f"{calls:.1f}", calls <= TARGET_CALLS if r.n in CALL_TARGET_SIZES else None),
        met(f"{pipelines:.2f}", pipelines <= TARGET_PIPELINES),
        met(f"{rebases:.2f}", rebases <= TARGET_REBASES),
        met(wall, r.validated == r.n and r.ratio <= TARGET_RATIO),
        f"{r.per_change(r.mr_reads):.1f}",
        f"{r.real_seconds:.0f} s",
    ]
    return "| " + " | ".join(cells) + " |"


def table(results: Sequence[Burst]) -> list[str]:
    """The markdown table of every burst, each figure beside its target."""
    return [HEADER, "|---" * (HEADER.count("|") - 1) + "|", *map(row, results)]


def why(results: Sequence[Burst]) -> list[str]:
    """Why the changes that did not end VALIDATED stopped, counted per burst."""
    lines = []
    for r in results:
        for reason, count in Counter(r.why.values()).most_common():
            lines.append(
                f"- {r.pipeline_seconds:.0f} s pipeline, n={r.n}: {count} stopped after {reason}"
            )
    return lines


def missed(results: Sequence[Burst]) -> list[str]:
    """One line per burst that misses a target: which."""
    out = []
    for r in results:
        calls = r.per_change(r.calls)
        misses = [
            name
            for name, ok in (
                ("not all VALIDATED", r.validated == r.n),
                (
                    f"{calls:.0f} calls per change",
                    r.n not in CALL_TARGET_SIZES or calls <= TARGET_CALLS,
                ),
                (
                    f"{r.per_change(r.pipelines):.2f} pipelines per change",
                    r.pipelines <= TARGET_PIPELINES * r.n,
                ),
                (f"{r.per_change(r.rebases):.2f} rebases per change", r.rebases <= r.n),
                (f"wall {r.ratio:.2f}x ideal", r.validated == r.n and r.ratio <= TARGET_RATIO),
            )
            if not ok
        ]
        if misses:
            out.append(f"{r.pipeline_seconds:.0f} s pipeline, n={r.n}: " + ", ".join(misses))
    return out


def section(results: Sequence[Burst], *, with_baseline: bool = True) -> list[str]:
    """The "Merge queue (issue 14)" section of BENCHMARKS.md: this run's table, then the
    committed baseline's (today's code before the queue, BASELINE) to compare with."""
    rebase = results[0].rebase_seconds if results else DEFAULT_REBASE
    lines = [
        "## Merge queue (issue 14)",
        "",
        "Bursts of n changes submitted together to one branch, approve-first, approvals at "
        "once, against the GitLab double with fast-forward merges: every MR pipeline succeeds "
        f"a fixed time after it starts, every rebase completes {rebase:.0f} s after it was "
        "asked, a merge takes no time, so the ideal serial time is n x (rebase + pipeline). "
        "Simulated clock (`tests/bench/bench_queue.py`: the whole bot in one process, SQLite, "
        "the in-process queue, webhooks as GitLab sends them, the outbox and sweep at their "
        "intervals); real time is what the burst took on this machine. GitLab calls count "
        "everything the double answered from submission to the end (status comments, labels, "
        "polls, and the read of the project's `.gitops/bot.yml` at submission: changes are "
        "submitted through the REST API with policy files on, the default), after one "
        "uncounted warm-up change.",
        "",
    ]
    lines += ["This run:", "", *table(results)]
    reasons = why(results)
    if reasons:
        lines += ["", "Where the changes that did not finish stopped (their last audit row):", ""]
        lines += reasons
    if with_baseline and BASELINE.exists():
        lines += ["", *BASELINE.read_text().rstrip("\n").splitlines()]
    return lines


def measure(
    sizes: Sequence[int],
    pipelines: Sequence[float] = DEFAULT_PIPELINES,
    rebase_seconds: float = DEFAULT_REBASE,
    *,
    progress: bool = False,
) -> list[Burst]:
    """One burst per pipeline duration and size, each in a fresh bot and double."""
    results = []
    for pipeline_seconds in pipelines:
        for n in sizes:
            result = burst(n, pipeline_seconds, rebase_seconds)
            if progress:
                print(
                    f"{pipeline_seconds:.0f} s pipeline, n={n}: {result.real_seconds:.1f} s "
                    f"real, {result.wall_seconds:.0f} s simulated",
                    file=sys.stderr,
                    flush=True,
                )
            results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="bursts of 1 and 4 only")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument(
        "--pipeline-seconds", type=float, nargs="+", default=list(DEFAULT_PIPELINES)
    )
    parser.add_argument("--rebase-seconds", type=float, default=DEFAULT_REBASE)
    parser.add_argument("--kinds", action="store_true", help="GitLab calls by kind per burst")
    parser.add_argument(
        "--write-baseline",
        metavar="LABEL",
        help=f"write this run to {BASELINE.name} as the baseline, with LABEL (e.g. the commit)",
    )
    args = parser.parse_args()
    sizes = QUICK_SIZES if args.quick else args.sizes
    results = measure(sizes, args.pipeline_seconds, args.rebase_seconds, progress=True)
    print("\n".join(section(results)))
    if args.write_baseline:
        lines = [f"**Baseline: {args.write_baseline}.**", "", *table(results)]
        reasons = why(results)
        if reasons:
            lines += ["", "Where the baseline's unfinished changes stopped:", "", *reasons]
        BASELINE.write_text("\n".join(lines) + "\n")
    if args.kinds:
        for r in results:
            print(f"\n{r.pipeline_seconds:.0f} s pipeline, n={r.n}: GitLab calls by kind")
            for name, count in sorted(r.kinds.items(), key=lambda kv: -kv[1]):
                print(f"    {count:5}  {name}")


if __name__ == "__main__":
    main()
