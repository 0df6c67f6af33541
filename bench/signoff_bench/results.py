"""What a run found: one ``Batch`` per side and concurrency, plus growth and scaling rows."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from signoff_bench.driver import Sample, summary_ms
from signoff_bench.window import Spent, side_cpu


@dataclass
class Batch:
    side: str
    concurrency: int
    n: int
    ok: int
    throughput: float
    latency_ms: dict[str, float]
    answer_ms: dict[str, float]
    seconds: float
    commits_per_proposal: float
    messages_per_proposal: float | None
    broker_per_proposal: dict[str, float] | None
    cpu_ms_per_proposal: dict[str, float]
    driver_cpu_ms_per_proposal: float
    machine_utilisation: float
    executors: int = 1
    #: which of the run's repeats (0, 1, 2 ...) measured it
    repeat: int = 0
    #: requests that did not answer 2xx (LangGraph's are reported, not dropped)
    failed: int = 0
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu_total_ms(self) -> float:
        return sum(self.cpu_ms_per_proposal.values())

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cpu_total_ms": self.cpu_total_ms}


def batch(
    side: str,
    concurrency: int,
    samples: list[Sample],
    done_at: dict[str, float],
    spent: Spent,
    *,
    messages: float | None,
    ok: int,
    processes: Mapping[str, int],
    executors: int = 1,
    broker: bool = True,
) -> Batch:
    """``done_at``: when each proposal's outcome was recorded (wall-clock seconds);
    ``processes``: the side's own, whose CPU (with the servers') is the batch's cost."""
    n = len(samples)
    latencies = [done_at[s.key] - s.sent for s in samples if s.key in done_at]
    first = min(s.sent for s in samples)
    last = max(done_at.values(), default=first)
    per_message = None
    if spent.broker is not None:
        per_message = {k: v / n for k, v in spent.broker.items()}
    return Batch(
        side=side,
        concurrency=concurrency,
        n=n,
        ok=ok,
        # only what completed counts (a failed LangGraph request has no outcome)
        throughput=len(latencies) / (last - first) if last > first else 0.0,
        latency_ms=summary_ms(latencies),
        answer_ms=summary_ms([s.answered - s.sent for s in samples]),
        seconds=last - first,
        commits_per_proposal=spent.commits / n,
        messages_per_proposal=None if messages is None else messages / n,
        broker_per_proposal=per_message,
        cpu_ms_per_proposal={
            k: v * 1000.0 / n for k, v in side_cpu(spent, processes, broker=broker).items()
        },
        driver_cpu_ms_per_proposal=spent.cpu.driver * 1000.0 / n,
        machine_utilisation=spent.machine_busy(first, last),
        executors=executors,
        failed=sum(1 for s in samples if not 200 <= s.status < 300),
    )


@dataclass
class GrowthRow:
    stored: int
    list_ms: dict[str, float]
    approval_ms: dict[str, float]
    sweep_ms: float
    swept: int
    load_seconds: float
    #: proposals on each page of the pending list (its limit is 50)
    listed: int = 0


@dataclass
class OpenStep:
    """One open-loop step: approvals offered at ``rate``, timed from their scheduled send."""

    side: str
    rate: float
    repeat: int
    n: int
    failed: int
    latency_ms: dict[str, float]
    #: approvals per second actually recorded over the step
    achieved: float
    held: bool


def open_step(
    side: str,
    rate: float,
    repeat: int,
    samples: list[Sample],
    done_at: dict[str, float],
    bound_ms: float,
) -> OpenStep:
    latencies = [done_at[s.key] - s.sent for s in samples if s.key in done_at]
    missing = sum(1 for s in samples if s.key not in done_at)
    summary = summary_ms(latencies)
    first = min(s.sent for s in samples)
    last = max(done_at.values(), default=first)
    return OpenStep(
        side=side,
        rate=rate,
        repeat=repeat,
        n=len(samples),
        failed=sum(1 for s in samples if not 200 <= s.status < 300) + missing,
        latency_ms=summary,
        achieved=len(latencies) / (last - first) if last > first else 0.0,
        held=missing == 0 and summary["p99"] <= bound_ms,
    )


def spread(values: list[float]) -> tuple[float, float, float] | None:
    """(median, lowest, highest) of the repeats' figures, or None when there are none."""
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def highest_held(steps: Iterable[tuple[str, int, float, bool]], side: str) -> list[float]:
    """Per repeat of ``side``'s open loop (steps as side, repeat, rate, held), the highest offered
    rate whose p99 held, 0 for a repeat where none did: the report's figure and the soak's rate."""
    best: dict[int, float] = {}
    for found, repeat, rate, held in steps:
        if found == side:
            best[repeat] = max(best.get(repeat, 0.0), rate if held else 0.0)
    return [best[repeat] for repeat in sorted(best)]


@dataclass
class Run:
    machine: dict[str, Any]
    versions: dict[str, str]
    config: dict[str, Any]
    batches: list[Batch] = field(default_factory=list)
    growth: list[GrowthRow] = field(default_factory=list)
    scaling: list[Batch] = field(default_factory=list)
    open_loop: list[OpenStep] = field(default_factory=list)
    profile: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    #: VmHWM of every process the run started, at its end
    peak_rss_mb: dict[str, float] = field(default_factory=dict)

    def find(self, side: str, concurrency: int) -> Batch | None:
        return next(
            (b for b in self.batches if b.side == side and b.concurrency == concurrency), None
        )

    def all(self, side: str, concurrency: int) -> list[Batch]:
        return [b for b in self.batches if b.side == side and b.concurrency == concurrency]

    def median(self, side: str, concurrency: int, figure: str) -> tuple[float, float, float] | None:
        """A batch figure over the repeats: ``throughput``, ``p50``/``p99`` (approve→outcome)
        or ``cpu`` (ms per proposal, all the side's processes and servers)."""
        return spread([_figure(b, figure) for b in self.all(side, concurrency)])

    def held_rate(self, side: str) -> tuple[float, float, float] | None:
        """Per repeat, the highest offered rate whose p99 held (0 when none did): its spread."""
        steps = ((s.side, s.repeat, s.rate, s.held) for s in self.open_loop)
        return spread(highest_held(steps, side))

    def as_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "versions": self.versions,
            "config": self.config,
            "batches": [b.as_dict() for b in self.batches],
            "growth": [asdict(g) for g in self.growth],
            "scaling": [b.as_dict() for b in self.scaling],
            "open_loop": [asdict(s) for s in self.open_loop],
            "profile": self.profile,
            "notes": self.notes,
            "peak_rss_mb": self.peak_rss_mb,
        }


def _figure(b: Batch, figure: str) -> float:
    if figure == "throughput":
        return b.throughput
    if figure == "cpu":
        return b.cpu_total_ms
    return b.latency_ms[figure]
