"""Side-by-side CPU comparisons of code paths, in one process: the harness of the services'
white-box microbenchmarks (``services/*/tests/perf``).

Those live beside the code they measure because they call its internals (the repository's
import rules keep ``bench/`` to the public interfaces). Each names *workloads*; a workload has
*paths* (say, the statements as they were and as they are), each a function running unit ``i``
on units of its own. ``run`` makes a fresh migrated database, builds the workloads on an engine
to it, runs each path ``BENCH_N`` units per round (default 400), alternating, ``BENCH_REPEATS``
rounds (default 3) after one warm-up round each, and prints per path the median process CPU
per unit (``time.process_time``: this process's CPU, the database's not included), its share of
the first path's, and the wall time. Figures, not assertions: nothing here passes or fails.
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from signoff_runtime.testing import servers
from signoff_runtime.testing.databases import fresh_database

Unit = Callable[[int], Awaitable[None]]
#: ``build(engine, database_url, total)``: the workloads, each path with ``total`` units
Build = Callable[[AsyncEngine, str, int], Awaitable[list["Workload"]]]
#: units per path run before the rounds: statements prepared, caches full
WARMUP = 50


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    #: path name → a function running unit ``i`` (each path gets its own units)
    paths: dict[str, Unit]


async def measure(unit: Unit, start: int, n: int) -> tuple[float, float]:
    """CPU ms and wall ms per unit for units ``start``…``start + n - 1``."""
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(start, start + n):
        await unit(i)
    return (
        (time.process_time() - cpu) * 1000 / n,
        (time.perf_counter() - wall) * 1000 / n,
    )


async def compare(workloads: list[Workload], n: int, repeats: int) -> None:
    """Warm up each path, then run them alternating, ``repeats`` rounds; print the medians."""
    for workload in workloads:
        results: dict[str, list[tuple[float, float]]] = {p: [] for p in workload.paths}
        for unit in workload.paths.values():
            await measure(unit, 0, min(n, WARMUP))
        start = min(n, WARMUP)
        for _ in range(repeats):
            for path, unit in workload.paths.items():
                results[path].append(await measure(unit, start, n))
            start += n
        base = statistics.median(c for c, _ in results[next(iter(results))])
        for path, figures in results.items():
            cpu = statistics.median(c for c, _ in figures)
            wall = statistics.median(w for _, w in figures)
            rounds = " ".join(f"{c:.3f}" for c, _ in figures)
            say(
                f"{workload.name:20} {path:9} CPU {cpu:7.3f} ms/unit ({cpu / base:5.0%})  "
                f"wall {wall:7.3f} ms/unit   rounds: {rounds}"
            )


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def run(build: Build) -> None:
    """The whole comparison on a fresh database (``BENCH_N`` and ``BENCH_REPEATS`` sizes)."""
    # the services' info lines are not what is measured (and would cost every path alike)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    n = int(os.environ.get("BENCH_N", "400"))
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    total = min(n, WARMUP) + n * repeats
    with ExitStack() as exits:
        async with fresh_database(servers.postgres_url(exits), "signoff_perf") as url:
            engine = create_async_engine(url, pool_size=2, max_overflow=0)
            try:
                workloads = await build(engine, url, total)
                say(f"# N={n} per round, {repeats} rounds, CPU = this process (not PostgreSQL)")
                await compare(workloads, n, repeats)
            finally:
                await engine.dispose()
