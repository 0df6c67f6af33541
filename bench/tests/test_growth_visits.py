"""Growth visits the sizes up and back down, and a size's figure is the mean of its visits."""

from __future__ import annotations

import pytest
from signoff_bench.growth import visits
from signoff_bench.report import flatness
from signoff_bench.results import GrowthRow, Run


def _row(stored: int, ms: float) -> GrowthRow:
    p = {"p50": ms, "p95": ms}
    return GrowthRow(stored, p, p, sweep_ms=ms * 200, swept=200, load_seconds=0.0, listed=50)


def test_the_sizes_go_up_and_come_back_down_the_largest_once() -> None:
    assert visits([1_000_000, 10_000, 100_000]) == [10_000, 100_000, 1_000_000, 100_000, 10_000]
    assert visits([1000]) == [1000]
    assert visits([2000, 1000, 2000]) == [1000, 2000, 1000]


def test_a_steady_drift_cancels_out_of_the_ratio() -> None:
    # the machine slows by 2 ms a visit and the size costs nothing: the first and the last
    # figure alone would read x1.5 (or x0.67 had it sped up); the means of the visits read x1.0
    sizes = visits([10_000, 100_000, 1_000_000])
    run = Run(machine={}, versions={}, config={})
    run.growth = [_row(s, 10.0 + 2.0 * i) for i, s in enumerate(sizes)]
    flat = flatness(run)
    assert flat is not None
    assert flat == pytest.approx(
        {"pending list": 1.0, "approval": 1.0, "expiry sweep per row": 1.0}
    )


def test_a_real_cost_of_size_still_shows() -> None:
    run = Run(machine={}, versions={}, config={})
    run.growth = [_row(1000, 10.0), _row(2000, 13.0), _row(1000, 10.0)]
    flat = flatness(run)
    assert flat is not None and flat["approval"] == pytest.approx(1.3)


def test_one_size_is_no_ratio() -> None:
    run = Run(machine={}, versions={}, config={})
    run.growth = [_row(1000, 10.0)]
    assert flatness(run) is None
