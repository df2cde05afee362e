"""Hostile repository content costs a bounded time on every runner: each case runs on the main
thread (as the RQ worker runs jobs) and on another thread (as the embedded server runs its
steps, where the old SIGALRM timer did nothing), returns its problem or answer within a generous
2 s where the old code took minutes or hours, and leaves an unrelated file of the same change
still checked. These are budget tests: the bound is wide on purpose, the unbounded versions
are orders of magnitude past it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from bot.app.checks import ChangedFile, ValidatorRule, check_files
from bot.app.checks.budget import Budget
from bot.core.path_policy import included_by

T = TypeVar("T")
#: The generous bound each hostile case finishes within.
BOUND = 2.0
#: The small budget the cases that need a deadline run under.
SMALL = Budget(per_file=0.3, per_change=1.5)
#: An unrelated file of the same change, and the problem it must still get.
BROKEN = ChangedFile("other/broken.json", '{"a": }')
BROKEN_PROBLEM = "other/broken.json:1:7: json: Expecting value"


@pytest.fixture(params=["main thread", "other thread"])
def on(request: pytest.FixtureRequest) -> Callable[[Callable[[], T]], tuple[T, float]]:
    """Runs a function on the main thread or on a thread of its own; (its result, seconds)."""

    def run(work: Callable[[], T]) -> tuple[T, float]:
        started = time.monotonic()
        if request.param == "main thread":
            return work(), time.monotonic() - started
        box: list[T] = []
        thread = threading.Thread(target=lambda: box.append(work()), daemon=True)
        thread.start()
        thread.join(60)
        assert box, "the work did not finish within 60 s"
        return box[0], time.monotonic() - started

    return run


def checked(
    schema: Any, content: str, budget: Budget | None = None, path: str = "config/a.yaml"
) -> list[str]:
    """The problems of `path` and BROKEN, `schema` applying to config/**."""
    rules = [ValidatorRule("config/**", "s.json")]
    text = json.dumps(schema)
    found = check_files([ChangedFile(path, content), BROKEN], rules, lambda _: text, budget)
    return [str(p) for p in found]


def test_a_catastrophic_pattern_is_answered_at_once(on: Any) -> None:
    """`^(a+)+$` against 50,000 `a`s and a `b`: Python's `re` backtracks for longer than the
    universe's age; RE2 answers "does not match" in milliseconds."""
    schema = {"properties": {"v": {"pattern": "^(a+)+$"}}}
    found, seconds = on(lambda: checked(schema, f"v: {'a' * 50_000}b\n"))
    assert seconds < BOUND
    assert found == [
        f"config/a.yaml:1:4: schema s.json: '{'a' * 29}…{'a' * 28}b' does not match '^(a+)+$' "
        "(at /v)",
        BROKEN_PROBLEM,
    ]


def test_an_exponential_any_of_stops_at_the_deadline(on: Any) -> None:
    """Forty levels of `anyOf: [$ref level-1, $ref level-1]` that all fail: 2^40 evaluations,
    stopped at the file's deadline with a problem naming the file."""
    defs: dict[str, Any] = {"l0": {"type": "integer"}}
    for n in range(1, 41):
        defs[f"l{n}"] = {"anyOf": [{"$ref": f"#/$defs/l{n - 1}"}] * 2}
    schema = {"$defs": defs, "$ref": "#/$defs/l40"}
    found, seconds = on(lambda: checked(schema, "not a number\n", SMALL))
    assert seconds < BOUND
    assert found == [
        "config/a.yaml:1:1: schema s.json: not checked: checking this file took more than 0.3 s",
        BROKEN_PROBLEM,
    ]


def test_a_huge_unique_items_array_is_checked_in_linear_time(on: Any) -> None:
    """40,000 distinct objects under `uniqueItems` (a 500 KB file; jsonschema compared them
    pairwise, some 8 * 10^8 comparisons): checked well within the bound, a duplicate found."""
    items = [{"n": n} for n in range(40_000)]
    unique = {"uniqueItems": True}
    found, seconds = on(lambda: checked(unique, json.dumps(items), path="config/a.json"))
    assert seconds < BOUND
    assert found == [BROKEN_PROBLEM]
    twice = json.dumps([*items, {"n": 7}])
    duplicated, seconds = on(lambda: checked(unique, twice, path="config/a.json"))
    assert seconds < BOUND
    assert duplicated[0].startswith("config/a.json:1:1: schema s.json: [{'n': 0}, ")
    assert duplicated[0].endswith(" (at /)")


def test_a_backtracking_glob_is_answered_at_once(on: Any) -> None:
    """`**a**a**a**a**a**b` against a 1,000-character path (minutes on Python's `re`), as a CI
    include and as a validator glob."""
    glob, path = "**a**a**a**a**a**b", "a" * 1000
    answer, seconds = on(lambda: included_by(path, [glob]))
    assert (answer, seconds < BOUND) == (None, True)
    rules = [ValidatorRule(glob, "s.json")]
    files = [ChangedFile(path + ".yaml", "x: 1\n"), BROKEN]
    found, seconds = on(lambda: check_files(files, rules, lambda _: "{}"))
    assert seconds < BOUND
    assert [str(p) for p in found] == [BROKEN_PROBLEM]


def test_a_yaml_file_too_slow_to_read_stops_at_the_deadline(on: Any) -> None:
    """A 3 MB flow sequence (pure-Python YAML reads it in some 20 s): the deadline stops the
    read at the node it reached, and the change's next file is still checked."""
    content = "[" + ", ".join("{a: 1}" for _ in range(400_000)) + "]\n"
    found, seconds = on(lambda: checked({}, content, SMALL))
    assert seconds < BOUND
    assert found[0].startswith("config/a.yaml:1:")
    assert found[0].endswith(": yaml: not checked: checking this file took more than 0.3 s")
    assert found[1:] == [BROKEN_PROBLEM]


def test_a_deep_yaml_file_is_a_problem_at_once(on: Any) -> None:
    """100,000 nested flow sequences: refused at the node past the depth limit, at once."""
    found, seconds = on(lambda: checked({}, "[" * 100_000 + "]" * 100_000))
    assert seconds < BOUND
    assert found == ["config/a.yaml:1:65: yaml: nested deeper than 64 levels", BROKEN_PROBLEM]


def test_the_change_limit_leaves_each_remaining_file_a_problem(on: Any) -> None:
    """Once the change's own limit is spent, each file left says it was not checked (a file
    never passes unchecked)."""
    slow = "[" + ", ".join("{a: 1}" for _ in range(400_000)) + "]\n"
    files = [ChangedFile(f"f{n}.yaml", slow) for n in range(3)] + [BROKEN]
    budget = Budget(per_file=0.3, per_change=0.5)
    found, seconds = on(lambda: [str(p) for p in check_files(files, [], lambda _: None, budget)])
    assert seconds < BOUND
    assert [p.split(":", 1)[0] for p in found] == ["f0.yaml", "f1.yaml", "f2.yaml", BROKEN.path]
    spent = "checks: not checked: the checks of this change took more than 0.5 s"
    assert found[2:] == [f"f2.yaml:1:1: {spent}", f"other/broken.json:1:1: {spent}"]


def test_the_steps_lease_is_renewed_between_files() -> None:
    """A change's checks may take up to 30 s, past the step's 30 s lease: the heartbeat runs
    before each file, so a slow hostile change never loses its lease mid-check (which would
    have the sweep run the same checks again, for ever)."""
    from bot.heartbeat import beating

    beats: list[str] = []
    files = [ChangedFile(f"config/{n}.json", '{"a": 1}') for n in range(3)]
    with beating(lambda: beats.append("beat")):
        assert check_files([*files, ChangedFile("gone.json", None)], [], lambda _: None) == []
    assert beats == ["beat"] * 3  # one per file checked, none for a deletion
