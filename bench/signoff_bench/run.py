"""The run. Everything is prepared first (proposals proposed, LangGraph threads started), then
the measured batches run back to back: at each concurrency signoff, the raw program matched to
signoff's figures, then LangGraph — alternating, so a change in the machine's other load
touches all three alike — then the executor scaling batches and the profiled batch. Growth comes
last, as it fills the proposals table."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path

import structlog

from signoff_bench import infra, machine, profile, report
from signoff_bench.growth import Growth
from signoff_bench.raw_side import Plan
from signoff_bench.results import Batch, Run
from signoff_bench.rig import Rig, rig
from signoff_bench.settings import BenchConfig, load

log = structlog.get_logger(__name__)


def _record(found: Batch) -> Batch:
    log.info(
        "bench.batch",
        side=found.side,
        concurrency=found.concurrency,
        executors=found.executors,
        per_s=round(found.throughput, 1),
        p99_ms=round(found.latency_ms["p99"], 1),
        commits=round(found.commits_per_proposal, 2),
        messages=found.messages_per_proposal,
        ok=f"{found.ok}/{found.n}",
    )
    return found


async def compare(r: Rig, config: BenchConfig, run: Run) -> None:
    n, levels = config.n, config.concurrency
    signoff = {c: await r.signoff.prepare(n) for c in levels}
    raw = {c: await r.raw.prepare(n) for c in levels}
    peer = {c: await r.peer.prepare(n) for c in levels}
    scaling = {e: await r.signoff.prepare(n) for e in config.executors if e > 1}
    profiled = await r.signoff.prepare(n) if config.profile else []
    log.info("bench.prepared")
    await r.windows.start(r.signoff.quiet)
    run.notes.append(f"idle background {await r.windows.calibrate():.1f} commits/s, subtracted")
    for c in levels:
        mine = _record(await r.signoff.measure(r.windows, signoff[c], c))
        run.batches.append(mine)
        plan = Plan(
            commits=mine.commits_per_proposal,
            messages=mine.messages_per_proposal or 0.0,
            message_bytes=int(mine.notes["message_bytes"]),
        )
        run.batches.append(_record(await r.raw.measure(r.windows, raw[c], c, plan)))
        run.batches.append(_record(await r.peer.measure(r.windows, peer[c], c)))
    await scale(r, config, run, scaling)
    if profiled:
        run.profile = await profile_batch(r, config, run, profiled)


async def scale(r: Rig, config: BenchConfig, run: Run, prepared: dict[int, list[str]]) -> None:
    """One executor is the comparison's batch at the highest concurrency; then more replicas."""
    top = config.scaling_concurrency
    first = run.find("signoff", top)
    if first is not None and 1 in config.executors:
        run.scaling.append(replace(first, notes={**first.notes, "from": "comparison batch"}))
    running = 1
    for executors in sorted(prepared):
        while running < executors:
            await asyncio.to_thread(r.stack.add_executor)
            running += 1
        await r.windows.close(r.signoff.quiet)  # the new processes' start-up is not measured
        found = await r.signoff.measure(r.windows, prepared[executors], top, executors)
        run.scaling.append(_record(found))


async def profile_batch(r: Rig, config: BenchConfig, run: Run, ids: list[str]) -> dict[str, object]:
    """py-spy on the service that spent the most CPU per proposal at the highest concurrency."""
    top = config.scaling_concurrency
    reference = run.find("signoff", top)
    services = r.stack.pids()
    costs = {} if reference is None else reference.cpu_ms_per_proposal
    hottest = max((s for s in services if s in costs), key=costs.__getitem__, default="proposals")
    out = r.log_dir / f"profile-{hottest}.txt"
    recording = profile.Recording(services[hottest], out)
    try:
        await recording.start()
    except RuntimeError as exc:
        return {"service": hottest, "summary": f"No profile: {exc}."}
    try:
        await r.signoff.measure(r.windows, ids, top)
    finally:
        await recording.stop()
    found = profile.summarize(out) if out.exists() else {"samples": 0}
    return {"service": hottest, **found, "summary": profile.markdown(hottest, found)}


async def main(config: BenchConfig) -> Run:
    async with rig(config) as r:
        run = Run(
            machine=machine.describe(),
            versions=machine.versions(
                await r.counters.server_version(), await infra.broker_version()
            ),
            config={k: str(v) for k, v in asdict(config).items()},
        )
        await compare(r, config, run)
        compared = r.peak_rss()  # growth restarts the proposals service
        growth = Growth(r, config.growth_samples)
        await growth.start()
        for stored in sorted(config.growth):
            row = await growth.measure(stored)
            log.info("bench.growth", **asdict(row))
            run.growth.append(row)
        grown = r.peak_rss()
        run.peak_rss_mb = {
            k: max(compared.get(k, 0.0), grown.get(k, 0.0)) for k in compared | grown
        }
    run.machine["load_at_end"] = os.getloadavg()
    return run


def entry() -> None:
    config = load()
    run = asyncio.run(main(config))
    sys.stdout.write(report.table(run) + "\n")
    if config.json_out is not None:
        config.json_out.write_text(json.dumps(run.as_dict(), indent=2, default=str))
    if config.doc is not None:
        report.write_doc(run, Path(config.doc))
