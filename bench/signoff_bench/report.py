"""The report: one comparison table (printed, and written into ``docs/benchmarks.md``), the
detail tables beneath it, and the targets of issue 11 checked against the figures.

``docs/benchmarks.md`` keeps what people wrote around the figures: only the block between the
``bench:begin`` and ``bench:end`` markers is replaced by a run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from signoff_bench.results import Batch, Run

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
SIDES = ("signoff", "raw", "langgraph")
SERVICE_RSS_LIMIT_MB = 100.0


def _f(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _rows(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _tp(b: Batch | None) -> float | None:
    return None if b is None else b.throughput


def _lat(b: Batch | None, quantile: str) -> float | None:
    return None if b is None else b.latency_ms[quantile]


def cpu_total(b: Batch | None) -> float | None:
    return None if b is None else b.cpu_total_ms


def comparison(run: Run) -> str:
    header = [
        "C",
        "signoff /s",
        "raw /s",
        "LangGraph /s",
        "signoff ÷ raw",
        "signoff ÷ LangGraph",
        "signoff p50 / p95 / p99 ms",
        "raw p99 ms",
        "LangGraph p99 ms",
        "commits per proposal (s · raw · LG)",
        "messages per proposal (s · raw)",
        "CPU ms per proposal (s · raw · LG)",
    ]
    rows = []
    for c in sorted({b.concurrency for b in run.batches}):
        s, r, g = (run.find(side, c) for side in SIDES)
        rows.append(
            [
                str(c),
                _f(_tp(s)),
                _f(_tp(r)),
                _f(_tp(g)),
                _f(_ratio(_tp(s), _tp(r)), 2),
                _f(_ratio(_tp(s), _tp(g)), 2),
                " / ".join(_f(_lat(s, p)) for p in ("p50", "p95", "p99")),
                _f(_lat(r, "p99")),
                _f(_lat(g, "p99")),
                " · ".join(_f(b.commits_per_proposal if b else None, 2) for b in (s, r, g)),
                " · ".join(_f(b.messages_per_proposal if b else None, 2) for b in (s, r)),
                " · ".join(_f(cpu_total(b)) for b in (s, r, g)),
            ]
        )
    return _rows(header, rows)


def cpu_breakdown(run: Run) -> str:
    batches = [*run.batches, *run.scaling]
    groups = sorted({g for b in batches for g in b.cpu_ms_per_proposal})
    header = ["side", "C", "executors", *groups, "driver", "machine busy"]
    rows = [
        [
            b.side,
            str(b.concurrency),
            str(b.executors),
            *(
                _f(b.cpu_ms_per_proposal.get(g), 2) if g in b.cpu_ms_per_proposal else ""
                for g in groups
            ),
            _f(b.driver_cpu_ms_per_proposal, 2),
            f"{b.machine_utilisation:.0%}",
        ]
        for b in batches
    ]
    return _rows(header, rows)


def growth(run: Run) -> str:
    header = [
        "stored",
        "pending list p50 / p95 ms",
        "approval→outcome p50 / p95 ms",
        "expiry sweep ms (rows)",
        "load s",
    ]
    rows = [
        [
            f"{g.stored:,}",
            f"{_f(g.list_ms['p50'])} / {_f(g.list_ms['p95'])}",
            f"{_f(g.approval_ms['p50'])} / {_f(g.approval_ms['p95'])}",
            f"{_f(g.sweep_ms)} ({g.swept})",
            _f(g.load_seconds),
        ]
        for g in run.growth
    ]
    return _rows(header, rows)


def scaling(run: Run) -> str:
    header = ["executors", "C", "proposals/s", "p99 ms", "CPU ms per proposal", "machine busy"]
    rows = [
        [
            str(b.executors),
            str(b.concurrency),
            _f(b.throughput),
            _f(b.latency_ms["p99"]),
            _f(b.cpu_total_ms),
            f"{b.machine_utilisation:.0%}",
        ]
        for b in run.scaling
    ]
    return _rows(header, rows)


def memory(run: Run) -> str:
    return _rows(
        ["process", "peak RSS MB"], [[n, _f(mb)] for n, mb in sorted(run.peak_rss_mb.items())]
    )


def flatness(run: Run) -> dict[str, float] | None:
    """Largest over smallest stored size, per growth metric (p50s and the sweep)."""
    if len(run.growth) < 2:
        return None
    first, last = run.growth[0], run.growth[-1]
    return {
        "pending list": last.list_ms["p50"] / first.list_ms["p50"],
        "approval": last.approval_ms["p50"] / first.approval_ms["p50"],
        "expiry sweep": last.sweep_ms / first.sweep_ms if first.sweep_ms else math.nan,
    }


def targets(run: Run) -> list[str]:
    lines = []
    for c in (16, 64):
        s, r, g = (run.find(side, c) for side in SIDES)
        to_raw = _ratio(_tp(s), _tp(r))
        to_lg = _ratio(_tp(s), _tp(g))
        lines.append(
            _check(f"signoff ≥ 70 % of raw at C={c}", to_raw, to_raw is not None and to_raw >= 0.7)
        )
        lines.append(
            _check(f"signoff ≥ 2.5 x LangGraph at C={c}", to_lg, to_lg is not None and to_lg >= 2.5)
        )
    s16 = run.find("signoff", 16)
    p99 = s16.latency_ms["p99"] if s16 else None
    lines.append(_check("approval→outcome p99 ≤ 60 ms at C=16", p99, p99 is not None and p99 <= 60))
    flat = flatness(run)
    if flat is None:
        lines.append("- growth flat within ±10 %: not measured (one size)")
    else:
        worst = max(flat.values(), key=lambda v: abs(v - 1.0))
        shown = ", ".join(f"{k} x{v:.2f}" for k, v in flat.items())
        lines.append(f"- growth flat within ±10 %: {_verdict(abs(worst - 1.0) <= 0.1)} ({shown})")
    services = {k: v for k, v in run.peak_rss_mb.items() if not k.startswith(("raw", "lang"))}
    heaviest = max(services.values(), default=0.0)
    lines.append(
        f"- each service ≤ 100 MB peak RSS: {_verdict(heaviest <= SERVICE_RSS_LIMIT_MB)} "
        f"(largest {heaviest:.0f} MB)"
    )
    return lines


def _verdict(ok: bool | None) -> str:
    return "**met**" if ok else "**missed**"


def _check(what: str, value: float | None, ok: bool | None) -> str:
    if value is None:
        return f"- {what}: not measured"
    return f"- {what}: {_verdict(ok)} ({value:.2f})"


def table(run: Run) -> str:
    parts = [
        comparison(run),
        "",
        *targets(run),
        "",
        "Growth",
        growth(run),
        "",
        "Scaling",
        scaling(run),
    ]
    return "\n".join(parts)


def block(run: Run) -> str:
    m, v = run.machine, run.versions
    load = " → ".join(
        ", ".join(f"{x:.2f}" for x in m[k]) for k in ("load_at_start", "load_at_end") if k in m
    )
    return "\n".join(
        [
            BEGIN,
            f"Measured on {m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, "
            f"kernel {m['kernel']}; load average (1, 5, 15 min) {load}.",
            "",
            "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
            "",
            "Sizes: "
            + ", ".join(
                f"{k}={val}" for k, val in run.config.items() if k not in ("doc", "json_out")
            )
            + ".",
            "",
            comparison(run),
            "",
            "Targets of issue 11:",
            "",
            *targets(run),
            "",
            "### CPU per proposal, by process group (ms)",
            "",
            cpu_breakdown(run),
            "",
            "### Peak memory",
            "",
            memory(run),
            "",
            "### Growth",
            "",
            growth(run),
            "",
            "### Scaling (executor processes)",
            "",
            scaling(run),
            "",
            *(["### Profile", "", str(run.profile.get("summary", "")), ""] if run.profile else []),
            *(["Notes: " + "; ".join(run.notes) + "."] if run.notes else []),
            END,
        ]
    )


def write_doc(run: Run, path: Path) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + block(run) + tail
    else:
        text = "# Benchmarks\n\n" + block(run) + "\n"
    path.write_text(text, encoding="utf-8")
