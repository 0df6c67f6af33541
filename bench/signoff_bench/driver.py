"""The load: approve every proposal of a batch over HTTP with ``concurrency`` workers.

Each worker holds one keep-alive connection and sends its next approval as soon as the previous
one is answered (a closed loop), so ``concurrency`` is the number of approvals in flight.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from signoff_bench.client import Connection


@dataclass(frozen=True, slots=True)
class Sample:
    key: str
    #: wall-clock seconds (``time.time``), comparable with the database's ``now()`` here
    sent: float
    answered: float
    status: int


async def approve_all(
    base_url: str,
    headers: Mapping[str, str],
    paths: Sequence[tuple[str, str]],
    concurrency: int,
) -> list[Sample]:
    """POST each ``(key, path)``; a sample per request, in completion order."""
    samples: list[Sample] = []
    pending = iter(paths)

    async def worker() -> None:
        conn = Connection(base_url, headers)
        try:
            for key, path in pending:
                sent = time.time()
                status, _ = await conn.request("POST", path)
                samples.append(Sample(key, sent, time.time(), status))
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(paths))))))
    return samples


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (``q`` in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    return {f"p{q}": percentile(seconds, q) * 1000.0 for q in (50, 95, 99)}
