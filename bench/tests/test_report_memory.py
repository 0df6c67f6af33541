"""The memory target's line names the heaviest service and its peak to the tenth."""

from __future__ import annotations

from signoff_bench.report import targets
from signoff_bench.results import Run


def _memory_line(peaks: dict[str, float]) -> str:
    run = Run(machine={}, versions={}, config={}, peak_rss_mb=peaks)
    return next(line for line in targets(run) if "peak RSS" in line)


def test_a_peak_just_under_the_limit_is_met_and_shown_as_it_is() -> None:
    # the raw programs and LangGraph are not services of signoff's, whatever their size
    line = _memory_line({"proposals": 99.6, "agent": 91.8, "langgraph-1": 120.0, "raw-front": 101})
    assert line == "- each service ≤ 100 MB peak RSS: **met** (largest proposals 99.6 MB)", line


def test_a_peak_over_the_limit_is_missed() -> None:
    line = _memory_line({"proposals": 100.1, "agent": 91.8})
    assert line == "- each service ≤ 100 MB peak RSS: **missed** (largest proposals 100.1 MB)"
