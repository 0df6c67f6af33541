"""Each service's memory, commits side by side: resident after start, and the peak under load.

``python -m signoff_bench.memory [REF ...]`` (with ``PYTHONPATH=bench``; no REF: the working
tree) exports each commit's tree ahead of the editable installs (``levers.export``), starts that
commit's four services exactly as the benchmark does (signoff alone, ``rig(sides=False)``) and
reads each one's ``VmRSS`` once the stack is healthy and the club seeded ("start"). Then the load:
``BENCH_N`` proposals proposed through the agent and approved at each of ``BENCH_CONCURRENCY``,
and one full cycle (propose → approve → outcome) at the highest; ``VmHWM`` (the peak resident
set) of each service after it ("peak"). The target is ≤ 100 MB peak for every service.
Repeat the list of commits in rotating order to see the neighbours' noise.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from signoff_bench import resources
from signoff_bench.levers import export
from signoff_bench.rig import rig
from signoff_bench.settings import BenchConfig, load

SERVICES = ("agent", "proposals", "executor", "reconciler")


@dataclass(frozen=True, slots=True)
class Memory:
    label: str
    #: service -> VmRSS (MB) once healthy, before any load
    start: dict[str, float]
    #: service -> VmHWM (MB) after the load
    peak: dict[str, float]
    load: tuple[float, float, float]


def rss_mb(pid: int) -> float | None:
    """``VmRSS`` of ``pid`` now (``resources.peak_rss_mb`` is the peak)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def _read(pids: dict[str, int], read: Callable[[int], float | None]) -> dict[str, float]:
    return {name: mb for name in SERVICES if (mb := read(pids[name])) is not None}


async def measure(label: str, config: BenchConfig) -> Memory:
    async with rig(config, sides=False) as r:
        pids = r.stack.pids()
        start = _read(pids, rss_mb)
        await r.windows.start(r.signoff.quiet)
        for c in config.concurrency:
            await r.signoff.measure(r.windows, await r.signoff.prepare(config.n), c)
        forms = await r.signoff.prepare_forms(config.n)
        await r.signoff.cycle(r.windows, forms, config.scaling_concurrency)
        return Memory(label, start, _read(pids, resources.peak_rss_mb), os.getloadavg())


async def at_ref(ref: str, config: BenchConfig) -> Memory:
    with tempfile.TemporaryDirectory(prefix="signoff-memory-") as tree:
        base = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [export(ref, Path(tree)), base]))
        try:
            return await measure(ref, config)
        finally:
            os.environ["PYTHONPATH"] = base


def table(found: list[Memory]) -> str:
    head = " | ".join(f"{m.label} start | {m.label} peak" for m in found)
    lines = [f"| service | {head} |", "|---|" + "---|---|" * len(found)]
    for name in SERVICES:
        cells = " | ".join(
            f"{m.start.get(name, float('nan')):.1f} | {m.peak.get(name, float('nan')):.1f}"
            for m in found
        )
        lines.append(f"| {name} | {cells} |")
    loads = "; ".join(f"{m.label} {', '.join(f'{x:.2f}' for x in m.load)}" for m in found)
    lines.append(
        f"\nMB (VmRSS after start, VmHWM after the load); load average at each end: {loads}"
    )
    return "\n".join(lines)


def main() -> None:
    config = replace(load(), profile=False, doc=None, json_out=None)
    refs: list[str | None] = [*sys.argv[1:]] or [None]
    found = []
    for ref in refs:
        result = asyncio.run(
            measure("working tree", config) if ref is None else at_ref(ref, config)
        )
        found.append(result)
        sys.stdout.write(table([result]) + "\n\n")
        sys.stdout.flush()
    if len(found) > 1:
        sys.stdout.write(table(found) + "\n")


if __name__ == "__main__":
    main()
