"""Measured windows, back to back: counters and CPU read once the system is quiet.

Everything a run needs is prepared before the first window (proposals proposed, LangGraph
threads started), so nothing but the measured batches happens between snapshots, and each
window's closing snapshot opens the next. A window closes when its side's ``quiet`` condition
holds (outboxes and queues empty) and ``FLUSH_S`` has passed for PostgreSQL's counters. Its
commits are the database's delta less the idle background (the pollers' commits per second,
measured once at the start, times the window's length): what remains is the batch's work.
The servers' CPU is treated alike: PostgreSQL's backends and RabbitMQ's node are measured with
nothing sent (the same calibration window), and that idle rate times the window's length is
subtracted from each window's figure — what remains is billed to the side measured. The broker
is shared with whatever else runs on the machine, so its figure is only as clean as the machine
is idle; the LangGraph side sends no messages and is never billed for it (``side_cpu``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

from signoff_bench import resources
from signoff_bench.infra import FLUSH_S, Counters, broker_counters

SERVERS = ("postgres", "rabbitmq")
Quiet = Callable[[], Awaitable[bool]]
Pids = Callable[[], Mapping[str, int]]


#: the machine's CPU ``(time.time(), busy seconds, total seconds)``, summed over cores
BusySample = tuple[float, float, float]
#: how often the machine's CPU is sampled (s)
SAMPLE_S = 0.1


@dataclass(frozen=True, slots=True)
class Spent:
    seconds: float
    commits: float
    cpu: resources.CpuUse
    broker: dict[str, int] | None
    #: the machine's CPU through the window, every ``SAMPLE_S``
    busy: tuple[BusySample, ...] = ()

    def machine_busy(self, first: float, last: float) -> float:
        """How busy the machine was from ``first`` to ``last`` (wall clock): the batch itself,
        not the window, whose quiet tail (``FLUSH_S`` of it) would dilute it; the window's
        figure if too few samples cover the span."""
        before = [b for b in self.busy if b[0] <= first]
        after = [b for b in self.busy if b[0] >= last]
        if not before or not after or after[0][2] <= before[-1][2]:
            return self.cpu.machine_utilisation
        start, end = before[-1], after[0]
        return (end[1] - start[1]) / (end[2] - start[2])


@dataclass(frozen=True, slots=True)
class _Mark:
    at: float
    commits: int
    cpu: resources.CpuSnapshot
    broker: dict[str, int] | None


@dataclass
class Windows:
    counters: Counters
    #: every process the run started, by name (services, raw program, LangGraph)
    processes: Pids
    broker_pids: list[int]
    background_per_s: float = 0.0
    #: idle CPU seconds per second of the servers (``postgres``, ``rabbitmq``)
    background_cpu_per_s: dict[str, float] = field(default_factory=dict)
    _last: _Mark | None = field(default=None, init=False)
    _busy: list[BusySample] = field(default_factory=list, init=False)
    _sampler: asyncio.Task[None] | None = field(default=None, init=False)

    async def _sample(self) -> None:
        while True:
            self._busy.append((time.time(), *resources.machine_busy_seconds()))
            await asyncio.sleep(SAMPLE_S)

    def stop(self) -> None:
        """Stop sampling the machine's CPU."""
        if self._sampler is not None:
            self._sampler.cancel()

    async def _mark(self) -> _Mark:
        groups = {name: [pid] for name, pid in self.processes().items()}
        groups["postgres"] = await self.counters.backend_pids()
        groups["rabbitmq"] = self.broker_pids
        broker = await broker_counters()
        return _Mark(
            time.monotonic(), await self.counters.commits(), resources.snapshot(groups), broker
        )

    async def start(self, quiet: Quiet) -> None:
        """The first snapshot, once everything prepared beforehand has drained and flushed."""
        await _until(quiet, 300.0)
        await asyncio.sleep(FLUSH_S)
        if self._sampler is None:
            self._sampler = asyncio.create_task(self._sample())
        self._last = await self._mark()

    async def close(self, quiet: Quiet, timeout: float = 300.0) -> Spent:
        """End the current window (and begin the next) once ``quiet`` holds and counters flushed."""
        assert self._last is not None, "start() first"
        await _until(quiet, timeout)
        await asyncio.sleep(FLUSH_S)
        before, after = self._last, await self._mark()
        self._last = after
        seconds = after.at - before.at
        broker = None
        if after.broker is not None and before.broker is not None:
            broker = {k: after.broker[k] - before.broker[k] for k in after.broker}
        caused = after.commits - before.commits - self.background_per_s * seconds
        cpu = resources.spent(before.cpu, after.cpu)
        per_group = {
            k: max(0.0, v - self.background_cpu_per_s.get(k, 0.0) * seconds)
            for k, v in cpu.per_group.items()
        }
        cpu = replace(cpu, per_group=per_group)
        # the samples since the last close, and the one just before it
        busy = tuple(self._busy)
        self._busy[:] = self._busy[-1:]  # the next window opens now
        return Spent(seconds, max(0.0, caused), cpu, broker, busy)

    async def calibrate(self, seconds: float = 3.0) -> float:
        """Commits per second of the idle system (relays', sweeps' and pollers' transactions)."""
        self.background_per_s = 0.0
        self.background_cpu_per_s = {}
        await asyncio.sleep(seconds)
        spent = await self.close(_always)
        self.background_per_s = spent.commits / spent.seconds
        self.background_cpu_per_s = {
            k: spent.cpu.per_group.get(k, 0.0) / spent.seconds for k in SERVERS
        }
        return self.background_per_s


def side_cpu(spent: Spent, names: Mapping[str, int], *, broker: bool = True) -> dict[str, float]:
    """A side's own processes plus the servers' share (less their idle background): what its
    batch cost the machine. A side that sends no messages (``broker=False``) is not billed for
    the broker."""
    keep = {*names, "postgres", *(["rabbitmq"] if broker else [])}
    return {k: v for k, v in spent.cpu.per_group.items() if k in keep}


async def _always() -> bool:
    return True


async def _until(quiet: Quiet, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await quiet():
        if time.monotonic() > deadline:
            raise AssertionError(f"the system did not go quiet within {timeout}s")
        await asyncio.sleep(0.1)
