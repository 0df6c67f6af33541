"""The timeline of one approval at a tiny size, exactly as ``make timeline`` runs it (a
subprocess): every hop must be found for every approval — the spans were exported, matched to
their proposal by message id, and every database moment was read — and the table printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
N = 3


def test_the_timeline_finds_every_hop_of_every_approval(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    env = {
        **os.environ,
        "BENCH_TIMELINE_N": str(N),
        "BENCH_TIMELINE_WARMUP": "1",
        "BENCH_TIMELINE_GAP_MS": "0",
        "BENCH_TIMELINE_JSON": str(out),
        "PYTHONPATH": str(BENCH),
    }
    done = subprocess.run(
        [sys.executable, "-m", "signoff_bench.timeline"],
        env=env,
        capture_output=True,
        text=True,
        timeout=550,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    [found] = json.loads(out.read_text())
    assert found["approvals"] == N
    missing = {name: hop["n"] for name, hop in found["hops"].items() if hop["n"] != N}
    assert missing == {}, missing
    # the hops follow each other: nothing on the path before the request, the outcome recorded
    # after the claim
    assert all(hop["since"][0] >= 0 for hop in found["hops"].values()), found["hops"]
    claim_to_recorded = found["spans"]["claim → outcome recorded"]
    assert claim_to_recorded[0] > 0, claim_to_recorded
    assert "| event: confirmed |" in done.stdout
