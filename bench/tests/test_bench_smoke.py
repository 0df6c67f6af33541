"""The benchmark harness at a tiny size, exactly as ``make bench`` runs it (a subprocess).

It must start every process, measure every side (signoff, raw, raw-minimal, LangGraph, and the
two full cycles), the open loop, growth and scaling, and print the table; signoff's and the raw
program's messages per proposal must match, since the raw program is configured from signoff's
figures, while raw-minimal stays at its fixed three messages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_the_harness_measures_every_side_and_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    doc = tmp_path / "benchmarks.md"
    env = {
        **os.environ,
        "BENCH_SMOKE": "1",
        "BENCH_JSON": str(out),
        "BENCH_DOC": str(doc),
        "PYTHONPATH": str(BENCH),
    }
    done = subprocess.run(
        [sys.executable, "-m", "signoff_bench"],
        env=env,
        capture_output=True,
        text=True,
        timeout=850,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    run = json.loads(out.read_text())
    concurrency = [int(c) for c in run["config"]["concurrency"].strip("()").split(",") if c]

    for c in concurrency:
        sides = {b["side"]: b for b in run["batches"] if b["concurrency"] == c}
        assert set(sides) == {
            "signoff",
            "raw",
            "raw-minimal",
            "langgraph",
            "signoff-cycle",
            "langgraph-cycle",
        }, c
        for side, found in sides.items():
            assert found["ok"] == found["n"], (side, c, found)
            assert found["throughput"] > 0, (side, c)
        signoff, raw = sides["signoff"], sides["raw"]
        assert signoff["messages_per_proposal"] == raw["messages_per_proposal"], (signoff, raw)
        # the plan reached the raw program: its messages are exact counts, set by the plan;
        # commits are not compared here — they come from a database-wide counter shared with
        # the idle pollers (and, it seems, autovacuum after the preparation's bulk inserts):
        # on a loaded machine two runs at N=20 missed by 3 and by 12 commits per proposal
        # (a quiet full run compares them in docs/benchmarks.md)
        minimal = sides["raw-minimal"]
        assert minimal["messages_per_proposal"] == 3.0, minimal
        assert sides["langgraph-cycle"]["failed"] == 0, sides["langgraph-cycle"]
        row = next(line for line in done.stdout.splitlines() if line.startswith(f"| {c} |"))
        assert row.count("|") == 13, row

    # up and back down; each visit swept a batch and listed a full page of the pending list
    assert [g["stored"] for g in run["growth"]] == [1000, 2000, 1000]
    assert all(g["swept"] > 0 and g["listed"] == 50 for g in run["growth"]), run["growth"]
    assert [b["executors"] for b in run["scaling"]] == [1]
    assert run["scaling"][0]["ok"] == run["scaling"][0]["n"], run["scaling"][0]
    for side in ("signoff", "raw-minimal"):
        steps = [s for s in run["open_loop"] if s["side"] == side]
        assert steps and all(s["n"] > 0 for s in steps), (side, run["open_loop"])
    assert {"proposals", "executor", "reconciler", "agent"} <= set(run["peak_rss_mb"])
    written = doc.read_text()
    assert "signoff ÷ raw-minimal" in written and "Targets of issue 18" in written
