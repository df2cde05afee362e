"""The burst benchmark's code path (tests/bench/bench_queue.py) on a burst of two: behaviour,
not timing (the clock is simulated)."""

from __future__ import annotations

from tests.bench.bench_queue import burst


def test_two_changes_to_one_branch_both_end_validated_with_one_merge_each() -> None:
    """Fast-forward merges, a 30 s pipeline and a 5 s rebase: the second change rebases after
    the first merged, and both end VALIDATED, each MR merged once."""
    result = burst(2, pipeline_seconds=30, rebase_seconds=5)
    assert (result.validated, result.failed, result.unfinished) == (2, {}, {})
    assert sorted(result.merged.values()) == [1, 1]
    assert result.merges == 2
    assert result.rebases >= 1  # the change that lost the race was rebased onto the other


def test_a_pipeline_longer_than_the_rebase_wait_still_merges_after_a_rebase() -> None:
    """With a 300 s pipeline the change that had to rebase ends VALIDATED too (the baseline
    left it in HANDLE_PIPELINE_PENDING: the new pipeline's webhook was judged against the head
    from before the rebase and dropped as stale)."""
    result = burst(2, pipeline_seconds=300, rebase_seconds=10)
    assert result.validated == 2, result.why
