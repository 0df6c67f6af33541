"""Side-by-side runs of several commits: how the "Levers tried" table was measured.

``python -m signoff_bench.levers REF [REF ...]`` (with ``PYTHONPATH=bench``) exports each commit's
tree (``git archive``) and puts its packages ahead of the editable installs on ``PYTHONPATH``,
which the services' processes inherit; then the usual rig starts that commit's services and
measures signoff's side only, ``BENCH_N`` proposals at each of ``BENCH_CONCURRENCY``. Repeat
the list of commits in rotating order to see the neighbours' noise. One line per batch.
``BENCH_LEVERS_CYCLE=1`` measures the full cycle instead (propose through the agent's
machine-facing endpoint, approve, outcome: ``signoff-cycle``), its forms made beforehand.

Each line also says how many of the database's backends waited on a lock, on average over the
batch and its window's quiet end (``lock_waits``, every ``LOCK_SAMPLE_S`` from
``pg_stat_activity``): a wait no CPU figure shows. A quota's lock taken too early kept 1.4
backends waiting on average in a full cycle at C=16, 0.03 once taken last (session 23). The
sampler's connection is to the server's own database, so its statements are not the batch's
commits, nor its backend the batch's CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import asyncpg
from signoff_runtime.db import asyncpg_dsn

from signoff_bench.infra import Database
from signoff_bench.results import Batch
from signoff_bench.rig import rig
from signoff_bench.settings import REPO, BenchConfig, load

#: how often ``LockWaits`` counts the backends waiting on a lock (s)
LOCK_SAMPLE_S = 0.05
_SOURCES = ("services/*/src", "shared/*/src", "examples/*/src", "cli/src", "web/src")


def export(ref: str, into: Path) -> str:
    """The commit's tree under ``into``; its package directories as a ``PYTHONPATH`` prefix."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return os.pathsep.join(str(p) for pattern in _SOURCES for p in sorted(into.glob(pattern)))


class LockWaits:
    """The mean number of the database's backends waiting on a heavyweight lock (a row, an
    advisory lock) while it runs, sampled from ``pg_stat_activity``."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._samples: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self._conn: asyncpg.Connection | None = None

    async def __aenter__(self) -> LockWaits:
        self._conn = await asyncpg.connect(asyncpg_dsn(self._db.server_url))
        self._task = asyncio.create_task(self._sample(self._conn))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None and self._conn is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._conn.close()

    async def _sample(self, conn: asyncpg.Connection) -> None:
        while True:
            waiting = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
                "AND wait_event_type = 'Lock'",
                self._db.name,
            )
            self._samples.append(int(waiting))
            await asyncio.sleep(LOCK_SAMPLE_S)

    @property
    def mean(self) -> float:
        return sum(self._samples) / len(self._samples) if self._samples else 0.0


def line(ref: str, found: Batch, lock_waits: float) -> str:
    cpu = found.cpu_ms_per_proposal
    python = sum(cpu.get(k, 0.0) for k in ("proposals", "executor", "agent"))
    return (
        f"{ref} C={found.concurrency} {found.throughput:.1f}/s "
        f"p99={found.latency_ms['p99']:.0f}ms python_cpu={python:.1f}ms "
        f"postgres={cpu.get('postgres', 0.0):.1f}ms rabbitmq={cpu.get('rabbitmq', 0.0):.1f}ms "
        f"busy={found.machine_utilisation:.0%} "
        f"(proposals {cpu.get('proposals', 0.0):.1f}, executor {cpu.get('executor', 0.0):.1f}, "
        f"agent {cpu.get('agent', 0.0):.1f}) "
        # what a proposal costs whatever the host's speed: the database's commits, and the
        # deliveries out of quorum queues (the broker's node-wide counter)
        f"commits={found.commits_per_proposal:.2f} delivered={_delivered(found)} "
        f"lock_waits={lock_waits:.2f}"
    )


def _delivered(found: Batch) -> str:
    counters = found.broker_per_proposal
    return "-" if counters is None else f"{counters.get('delivered', 0.0):.2f}"


async def measure(ref: str, config: BenchConfig, *, cycle: bool = False) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="signoff-lever-") as tree:
        base = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [export(ref, Path(tree)), base]))
        try:
            async with rig(config) as r:
                if cycle:
                    prepared = {
                        c: await r.signoff.prepare_forms(config.n) for c in config.concurrency
                    }
                    lines = [f"{ref} full cycle"]
                else:
                    t0 = time.monotonic()
                    prepared = {c: await r.signoff.prepare(config.n) for c in config.concurrency}
                    rate = len(config.concurrency) * config.n / (time.monotonic() - t0)
                    lines = [f"{ref} propose {rate:.1f}/s (untimed preparation)"]
                batch = r.signoff.cycle if cycle else r.signoff.measure
                await r.windows.start(r.signoff.quiet)
                await r.windows.calibrate()
                for c in config.concurrency:
                    async with LockWaits(r.db) as waits:
                        found = await batch(r.windows, prepared[c], c)
                    lines.append(line(ref, found, waits.mean))
                return lines
        finally:
            os.environ["PYTHONPATH"] = base


def main() -> None:
    config = replace(load(), peer_processes=1, profile=False, doc=None, json_out=None)
    cycle = os.environ.get("BENCH_LEVERS_CYCLE", "") == "1"
    for ref in sys.argv[1:]:
        for found in asyncio.run(measure(ref, config, cycle=cycle)):
            sys.stdout.write(found + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
