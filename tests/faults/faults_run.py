"""Running one scenario end to end, and the results table.

``SIGNOFF_FAULTS=long`` selects the long run (every scenario and every negative control, hundreds
of proposals each); otherwise a short run of a few scenarios is part of ``make test``.
``SIGNOFF_FAULTS_SEED`` (default 9) seeds every random choice — which cases race, when a fault
strikes, which executor dies, the provider's dice — so a failing run can be repeated;
``SIGNOFF_FAULTS_PROPOSALS`` sets the proposals per scenario and ``SIGNOFF_FAULTS_SETTLE_S`` the
settle deadline. ``SIGNOFF_FAULTS_WRITE_DOCS=1`` (``make faults``) writes the table into
``docs/reliability.md``.
"""

from __future__ import annotations

import asyncio
import os
import platform
import random
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from faults_checker import Report, check, quiet, settled
from faults_history import Driver, History
from faults_scenarios import SCENARIOS, Run, Scenario
from faults_stack import FaultStack

LONG = os.environ.get("SIGNOFF_FAULTS", "short") == "long"
SEED = int(os.environ.get("SIGNOFF_FAULTS_SEED", "9"))
PROPOSALS = int(os.environ.get("SIGNOFF_FAULTS_PROPOSALS", "200" if LONG else "14"))
SETTLE_S = float(os.environ.get("SIGNOFF_FAULTS_SETTLE_S", "150" if LONG else "60"))
RESULTS: list[Report] = []
#: each protection, switched off; the scenario built to need it; the one violation (a column of
#: the table, a ``Report`` field) its absence must cause — any other violation does not count
CONTROLS: dict[str, tuple[str, str]] = {
    "SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS": ("3-races", "duplicate_local"),
    "SIGNOFF_UNSAFE__SKIP_QUORUM": ("3-races-quorum", "claimed short of its quorum"),
    "SIGNOFF_UNSAFE__NO_DEDUP": ("6-duplicates", "duplicate_local"),
    "SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY": ("2-provider", "disagreeing"),
    "SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX": ("7-relay", "lost"),
    "SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM": ("7-relay", "lost"),
}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
START, END = "<!-- faults:results:start -->", "<!-- faults:results:end -->"


async def run_scenario(
    stack: FaultStack,
    name: str,
    switches: Mapping[str, str] | None = None,
    *,
    scenarios: Mapping[str, Scenario] = SCENARIOS,
    proposals: int = PROPOSALS,
) -> Report:
    """Seed cases, propose them, inject the scenario's faults under a stream of approvals, wait
    for every proposal to settle (up to the deadline), wait for quiet, then check."""
    scenario = scenarios[name]
    switches = dict(switches or {})
    await asyncio.to_thread(stack.configure, switches)
    rng = random.Random(f"{SEED}:{name}:{','.join(sorted(switches))}")
    history = History()
    driver = Driver(stack, history, rng)
    cases = await driver.cases(proposals)
    run = Run(stack, driver, rng, SEED, cases, LONG)
    if scenario.prepare is not None:
        await scenario.prepare(run)
    await driver.propose_all(cases[len(cases) // 2 :] if scenario.live_proposals else cases)
    await scenario.inject(run)
    settle_s = await settled(stack, cases, history, SETTLE_S)
    await quiet(stack)
    if scenario.after is not None:
        await scenario.after(run)
    report = await check(stack, name, SEED, cases, history, run.allowances)
    report.faults, report.settle_s, report.extra = run.faults, settle_s, run.extra
    report.must_reconcile = scenario.must_reconcile
    report.switches = ",".join(s.removeprefix("SIGNOFF_UNSAFE__").lower() for s in switches)
    report.expected = ",".join(CONTROLS[s][1] for s in switches if s in CONTROLS)
    RESULTS.append(report)
    return report


def table(reports: list[Report]) -> str:
    head = (
        "| scenario | protections | seed | proposals | operations ok/failed/indeterminate | "
        "faults | succeeded (must) | reconciled | duplicate external | duplicate local | lost | "
        "unresolved | disagreeing | other | settle s | verdict |"
    )
    lines = [head, "|" + "---|" * 16]
    for r in reports:
        control = bool(r.switches)
        if control:
            verdict = f"caught ({r.expected})" if r.caught else f"NOT CAUGHT ({r.expected})"
        else:
            verdict = "pass" if r.passed else "FAIL"
        other = ", ".join(f"{k}: {v}" for k, v in r.extra.items()) or "0"
        ops = "/".join(
            str(sum(n for key, n in r.operations.items() if key.endswith(":" + result)))
            for result in ("ok", "failed", "indeterminate")
        )
        lines.append(
            f"| {r.scenario} | {'off: ' + r.switches if control else 'all on'} | {r.seed} | "
            f"{r.proposals} | {ops} | {r.faults} | {r.succeeded} ({r.must_succeed}) | "
            f"{r.reconciled}{' (must > 0)' if r.must_reconcile else ''} | "
            f"{r.duplicate_external} | {r.duplicate_local} | "
            f"{r.lost} | {r.unresolved} | {r.disagreeing} | {other} | {r.settle_s:.1f} | "
            f"{verdict} |"
        )
    return "\n".join(lines)


def findings(reports: list[Report], per_report: int = 3) -> str:
    """The first violations each report found (what a negative control was caught doing)."""
    lines = []
    for r in reports:
        name = f"{r.scenario} ({'off: ' + r.switches if r.switches else 'all on'})"
        if r.violations:
            lines += [f"- {name}: {detail}" for detail in r.details[:per_report]]
        if not r.switches:
            lines += [f"- {name}: {short}" for short in r.progress_shortfall]
    return "\n".join(lines)


def describe(report: Report) -> str:
    return "\n".join(
        [
            table([report]),
            f"operations: {report.operations}",
            f"statuses: {report.statuses}",
            f"allowed to end without success: {report.allowances or 'none'}",
            *report.progress_shortfall,
            *report.details,
        ]
    )


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}, {platform.system()} {platform.release()}"


def write_docs(reports: list[Report], seconds: float) -> None:
    """Put the last long run's table (with its seed and machine) into docs/reliability.md."""
    text = DOCS.read_text()
    if START not in text or END not in text:
        return
    mode = "long" if LONG else "short"
    block = "\n".join(
        [
            START,
            f"Last {mode} run: {datetime.now(UTC):%Y-%m-%d}, seed {SEED}, {PROPOSALS} proposals "
            f"per scenario, {seconds / 60:.1f} min, on {machine()}.",
            "",
            table(reports),
            "",
            "What the checker reported where it found violations (first lines of each):",
            "",
            findings(reports),
            END,
        ]
    )
    DOCS.write_text(re.sub(re.escape(START) + ".*?" + re.escape(END), block, text, flags=re.S))


SESSION_STARTED = time.monotonic()
