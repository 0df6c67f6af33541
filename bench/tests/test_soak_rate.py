"""The soak's default rate is half the open-loop figure the report gives for the same run."""

from __future__ import annotations

import json
from pathlib import Path

from signoff_bench.results import highest_held
from signoff_bench.soak import FALLBACK_RATE, _rate


def _steps(*rows: tuple[str, int, float, bool]) -> list[dict[str, object]]:
    return [{"side": s, "repeat": r, "rate": rate, "held": held} for s, r, rate, held in rows]


def test_a_repeat_that_held_no_rate_counts_as_zero(tmp_path: Path) -> None:
    """Session 11's run: signoff held 20/s, then nothing (its 10/s step missed), then 40/s. The
    report's median is 20/s; the soak had read 40/s, skipping the repeat that held nothing."""
    steps = _steps(
        ("signoff", 1, 10, True),
        ("signoff", 1, 20, True),
        ("signoff", 1, 30, False),
        ("signoff", 2, 10, False),
        ("signoff", 3, 20, True),
        ("signoff", 3, 40, True),
        ("signoff", 3, 60, False),
        ("raw-minimal", 1, 120, True),
    )
    rows = [(st["side"], st["repeat"], st["rate"], st["held"]) for st in steps]
    assert highest_held(rows, "signoff") == [20, 0, 40]
    committed = tmp_path / "benchmarks.json"
    committed.write_text(json.dumps({"open_loop": steps}))
    assert _rate("", committed) == (10.0, "half the committed open-loop result (20/s)")


def test_nothing_held_falls_back_and_a_given_rate_wins(tmp_path: Path) -> None:
    committed = tmp_path / "benchmarks.json"
    committed.write_text(json.dumps({"open_loop": _steps(("signoff", 1, 10, False))}))
    assert _rate("", committed)[0] == FALLBACK_RATE
    assert _rate("", tmp_path / "absent.json")[0] == FALLBACK_RATE
    assert _rate("7", committed) == (7.0, "BENCH_SOAK_RATE")
