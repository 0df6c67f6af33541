"""The load: approve every proposal of a batch over HTTP with ``concurrency`` workers.

Each worker holds one keep-alive connection and sends its next approval as soon as the previous
one is answered (a closed loop), so ``concurrency`` is the number of approvals in flight.

``cycle_all`` runs a whole cycle per key in the same closed loop (propose → approve, or start →
resume), and ``offer`` is the open loop: requests sent at a fixed rate whatever the answers do,
each timed from when it was *scheduled* to leave, so a stalled server cannot hide its queue by
slowing the driver down (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from signoff_bench.client import Connection, HttpError


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


#: one step of a cycle: given the connections by name and the key, (status, the next key)
Step = Callable[[Mapping[str, Connection], str], Awaitable[tuple[int, str]]]


async def cycle_all(
    bases: Mapping[str, str],
    headers: Mapping[str, str],
    keys: Sequence[str],
    steps: Sequence[Step],
    concurrency: int,
) -> list[Sample]:
    """Run ``steps`` in order for each key (a step may replace the key: propose answers the
    proposal's id); a sample per cycle, sent at its first step, answered at its last, keyed by
    the final key. A failed step ends its cycle with that status (counted, not dropped)."""
    samples: list[Sample] = []
    pending = iter(keys)

    async def worker() -> None:
        conns = {name: Connection(url, headers) for name, url in bases.items()}
        try:
            for key in pending:
                sent, status, current = time.time(), 0, key
                for step in steps:
                    status, current = await step(conns, current)
                    if status >= 300:
                        break
                samples.append(Sample(current, sent, time.time(), status))
        finally:
            for conn in conns.values():
                await conn.close()

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(keys))))))
    return samples


async def offer(
    base_url: str,
    headers: Mapping[str, str],
    paths: Sequence[tuple[str, str]],
    rate: float,
) -> list[Sample]:
    """POST each ``(key, path)`` at ``rate`` per second from now, each on an idle keep-alive
    connection (a new one when none is idle); ``Sample.sent`` is the *scheduled* time."""
    samples: list[Sample] = []
    idle: list[Connection] = []
    opened: list[Connection] = []
    start = time.time() + 0.05

    async def one(key: str, path: str, scheduled: float) -> None:
        conn = idle.pop() if idle else None
        if conn is None:
            conn = Connection(base_url, headers)
            opened.append(conn)
        try:
            status, _ = await conn.request("POST", path)
        except (OSError, HttpError, asyncio.IncompleteReadError):
            status = 599
            await conn.close()
        samples.append(Sample(key, scheduled, time.time(), status))
        idle.append(conn)

    tasks = []
    try:
        for i, (key, path) in enumerate(paths):
            scheduled = start + i / rate
            delay = scheduled - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(key, path, scheduled)))
        await asyncio.gather(*tasks)
    finally:
        for conn in opened:
            await conn.close()
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
