"""A sweep round that changed something is timed (``signoff_proposals_sweep_seconds``); an empty
round, and a failed one, are not: the figure is the cost of real work (the benchmark reads it)."""

from __future__ import annotations

import asyncio
import contextlib

from prometheus_client import REGISTRY
from signoff_proposals import sweeps
from signoff_runtime.testing import wait_until


def _rounds(name: str) -> float:
    found = REGISTRY.get_sample_value("signoff_proposals_sweep_seconds_count", {"sweep": name})
    return found or 0.0


async def test_only_rounds_that_did_something_are_timed() -> None:
    results = iter([3, 0, 0, 2])
    calls = 0

    async def once() -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ConnectionError("database restarting")
        return next(results, 0)

    async def six_rounds() -> bool:
        return calls >= 6

    before = _rounds("unit_sweep")
    loop = asyncio.ensure_future(sweeps.every("unit_sweep", 0.01, 100, once)())
    try:
        await wait_until(six_rounds, what="six rounds")
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    # rounds: 3 (timed), a failure, 0, 0, 2 (timed), 0 …
    assert _rounds("unit_sweep") - before == 2
