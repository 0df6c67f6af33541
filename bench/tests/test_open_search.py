"""The open loop's search: fixed steps until one misses the bound, then the gap halved."""

from __future__ import annotations

import asyncio

from signoff_bench.run import search_rates


def _search(rates: tuple[int, ...], refine: int, holds_below: float) -> list[float]:
    tried: list[float] = []

    async def attempt(rate: float) -> bool:
        tried.append(rate)
        return rate < holds_below

    asyncio.run(search_rates(rates, refine, attempt))
    return tried


def test_the_gap_after_the_first_miss_is_halved_toward_what_holds() -> None:
    # 25 held, 50 missed: 38 holds, 44 misses, 41 misses — the figure is 38, not 25
    assert _search((25, 50, 100), 3, 40.0) == [25, 50, 38, 44, 41]


def test_no_refinement_keeps_the_fixed_steps() -> None:
    assert _search((25, 50, 100), 0, 40.0) == [25, 50]


def test_a_side_that_holds_every_step_is_not_refined() -> None:
    assert _search((25, 50), 2, 1000.0) == [25, 50]


def test_a_first_step_that_misses_is_bisected_from_zero() -> None:
    assert _search((25, 50), 2, 10.0) == [25, 12, 6]


def test_the_search_stops_when_no_whole_rate_lies_between() -> None:
    assert _search((40, 41), 5, 40.5) == [40, 41]
