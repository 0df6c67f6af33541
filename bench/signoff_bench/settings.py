"""What one benchmark run measures, read from ``BENCH_*`` environment variables.

Sizes are configurable so the same harness serves the full run (``make bench``) and the smoke
test (``BENCH_SMOKE=1``: tiny sizes, one concurrency, one executor, no profile — the same code
path; about a minute and a half on an otherwise idle machine, most of it waiting for
PostgreSQL to flush its counters between windows).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _ints(name: str, default: str) -> tuple[int, ...]:
    raw = os.environ.get(name, default)
    values = tuple(int(part) for part in raw.replace(" ", "").split(",") if part)
    if not values or min(values) < 1:
        raise ValueError(f"{name} must list positive integers, got {raw!r}")
    return values


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    return default if raw is None else raw.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class BenchConfig:
    smoke: bool
    #: proposals per measured batch (each concurrency, each side)
    n: int
    concurrency: tuple[int, ...]
    #: proposals already stored for the growth measurement
    growth: tuple[int, ...]
    #: executor processes for the scaling measurement (card refunds, a late provider)
    executors: tuple[int, ...]
    #: how late the card provider answers each refund (ms): I/O-bound executor work
    provider_delay_ms: int
    #: each executor's window (``SIGNOFF_EXECUTOR__CONCURRENCY``) in the scaling batches; 0
    #: keeps the service's default (see ``run.scale``)
    scaling_window: int
    #: each batch this many times, the sides' order alternating between repeats
    repeats: int
    #: the open loop's rates (approvals per second), stepped up until p99 exceeds the bound
    open_rates: tuple[int, ...]
    #: how many times the open loop halves the gap between the highest rate that held and the
    #: lowest that missed (``run.search_rates``)
    open_refine: int
    #: how long each open-loop step offers approvals (s)
    open_seconds: float
    #: the open loop's bound on approve→outcome p99 (ms)
    open_p99_ms: float
    #: approvals and list calls sampled at each growth size
    growth_samples: int
    #: LangGraph peer processes (one per core by default: it is one process per worker)
    peer_processes: int
    #: attach py-spy to the hottest service for one extra batch
    profile: bool
    doc: Path | None
    json_out: Path | None
    keep_database: bool

    @property
    def scaling_concurrency(self) -> int:
        return max(self.concurrency)


def load() -> BenchConfig:
    smoke = _flag("BENCH_SMOKE", False)
    doc = os.environ.get("BENCH_DOC", "" if smoke else str(REPO / "docs" / "benchmarks.md"))
    json_out = os.environ.get("BENCH_JSON", "" if smoke else str(REPO / "docs" / "benchmarks.json"))
    return BenchConfig(
        smoke=smoke,
        n=_ints("BENCH_N", "20" if smoke else "400")[0],
        concurrency=_ints("BENCH_CONCURRENCY", "4" if smoke else "1,16,64"),
        growth=_ints("BENCH_GROWTH", "1000,2000" if smoke else "10000,100000,1000000"),
        executors=_ints("BENCH_EXECUTORS", "1" if smoke else "1,2,4"),
        provider_delay_ms=int(os.environ.get("BENCH_PROVIDER_DELAY_MS", "100")),
        scaling_window=int(os.environ.get("BENCH_SCALING_WINDOW", "1")),
        repeats=_ints("BENCH_REPEATS", "1" if smoke else "3")[0],
        open_rates=_ints("BENCH_OPEN_RATES", "10,20" if smoke else "25,50,100,150,200,300,400"),
        open_refine=int(os.environ.get("BENCH_OPEN_REFINE", "0" if smoke else "2")),
        open_seconds=float(os.environ.get("BENCH_OPEN_SECONDS", "2" if smoke else "10")),
        open_p99_ms=float(os.environ.get("BENCH_OPEN_P99_MS", "100")),
        growth_samples=_ints("BENCH_GROWTH_SAMPLES", "5" if smoke else "40")[0],
        peer_processes=_ints("BENCH_PEER_PROCESSES", "1" if smoke else str(os.cpu_count() or 1))[0],
        profile=_flag("BENCH_PROFILE", not smoke),
        doc=Path(doc) if doc else None,
        json_out=Path(json_out) if json_out else None,
        keep_database=_flag("BENCH_KEEP_DB", False),
    )
