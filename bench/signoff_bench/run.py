"""The run. Each batch is prepared just before it (proposals proposed, LangGraph threads
started) in a window of its own that is thrown away, then measured: at each concurrency
signoff, the raw program matched to signoff's figures, raw-minimal (fixed), LangGraph, then the
full cycles — the order reversed on every other repeat, so a change in the machine's other
load touches every side alike. Each repeat ends with the open loop and the executor scaling
batches; the profiled batch comes after the repeats, growth last, as it fills the proposals
table."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

import structlog

from signoff_bench import infra, machine, profile, report
from signoff_bench.growth import Growth
from signoff_bench.raw_side import MINIMAL, Plan
from signoff_bench.results import Batch, Run, open_step
from signoff_bench.rig import Rig, rig
from signoff_bench.settings import BenchConfig, load

log = structlog.get_logger(__name__)
T = TypeVar("T")


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
    """Each repeat measures every side at every concurrency (resume-only, then full cycle),
    the sides' order reversed on every other repeat; then the open loop and executor scaling."""
    n, levels = config.n, config.concurrency
    await r.windows.start(r.signoff.quiet)
    background = await r.windows.calibrate()
    cpu = ", ".join(f"{k} {v * 1000:.0f} ms/s" for k, v in r.windows.background_cpu_per_s.items())
    run.notes.append(
        f"idle background {background:.1f} commits/s and CPU {cpu or 'none'} (the servers, "
        "measured with nothing sent), subtracted from every window"
    )
    plans: dict[int, Plan] = {}
    for repeat in range(config.repeats):
        for c in levels:
            order = ["signoff", "raw", "raw-minimal", "langgraph"]
            if repeat % 2:
                order.reverse()
            for side in order:
                await _resume_batch(r, run, side, c, n, repeat, plans)
            for side in ("signoff-cycle", "langgraph-cycle")[:: -1 if repeat % 2 else 1]:
                await _cycle_batch(r, run, side, c, n, repeat)
        await open_loop(r, config, run, repeat)
        await scale(r, config, run, repeat)


async def _resume_batch(
    r: Rig, run: Run, side: str, c: int, n: int, repeat: int, plans: dict[int, Plan]
) -> None:
    if side == "signoff":
        found = await r.signoff.measure(r.windows, await _ready(r, r.signoff.prepare(n)), c)
        plans[c] = Plan(
            commits=found.commits_per_proposal,
            messages=found.messages_per_proposal or 0.0,
            message_bytes=int(found.notes["message_bytes"]),
        )
    elif side in ("raw", "raw-minimal"):
        # raw matches signoff's figures: this repeat's, or the previous one's when raw goes first
        plan = MINIMAL if side == "raw-minimal" else plans.get(c)
        if plan is None:
            return
        ids = await _ready(r, r.raw.prepare(n))
        found = await r.raw.measure(r.windows, ids, c, plan, side)
    else:
        found = await r.peer.measure(r.windows, await _ready(r, r.peer.prepare(n)), c)
    found.repeat = repeat
    run.batches.append(_record(found))


async def _cycle_batch(r: Rig, run: Run, side: str, c: int, n: int, repeat: int) -> None:
    if side == "signoff-cycle":
        forms = await _ready(r, r.signoff.prepare_forms(n))
        found = await r.signoff.cycle(r.windows, forms, c)
    else:
        threads = await _ready(r, r.peer.prepare_forms(n))
        found = await r.peer.cycle(r.windows, threads, c)
    found.repeat = repeat
    run.batches.append(_record(found))


async def _ready(r: Rig, preparing: Awaitable[T]) -> T:
    """Prepare outside the measured windows: the window that preparing spans is discarded."""
    prepared = await preparing
    await r.windows.close(_quiet_all(r))
    return prepared


def _quiet_all(r: Rig) -> Callable[[], Awaitable[bool]]:
    async def quiet() -> bool:
        return await r.signoff.quiet() and await r.raw.quiet()

    return quiet


async def open_loop(r: Rig, config: BenchConfig, run: Run, repeat: int) -> None:
    """Approvals offered at each rate for ``open_seconds``, stepped up until p99
    approve→outcome exceeds the bound; signoff and raw-minimal, alternating first."""
    sides = ["signoff", "raw-minimal"][:: -1 if repeat % 2 else 1]
    for side in sides:
        for rate in config.open_rates:
            n = max(1, int(rate * config.open_seconds))
            if side == "signoff":
                ids = await _ready(r, r.signoff.prepare(n))
                samples = await r.signoff.open_loop(ids, rate)
                done = await r.signoff.outcome_times(ids)
            else:
                ids = await _ready(r, r.raw.prepare(n))
                samples = await r.raw.open_loop(ids, rate)
                done = await r.raw.outcome_times(ids)
            await r.windows.close(_quiet_all(r))
            step = open_step(side, rate, repeat, samples, done, config.open_p99_ms)
            log.info(
                "bench.open_loop",
                side=side,
                rate=rate,
                p99_ms=round(step.latency_ms["p99"], 1),
                held=step.held,
                failed=step.failed,
            )
            run.open_loop.append(step)
            if not step.held:
                break


async def scale(r: Rig, config: BenchConfig, run: Run, repeat: int) -> None:
    """Card refunds (the provider answering after ``provider_delay_ms``) at the highest
    concurrency with 1, 2, 4 ... executor processes; back to one executor afterwards."""
    top = config.scaling_concurrency
    for executors in sorted(config.executors):
        while r.stack.executors() < executors:
            await asyncio.to_thread(r.stack.add_executor)
        ids = await _ready(r, r.signoff.prepare_refunds(config.n))
        found = await r.signoff.measure(r.windows, ids, top, executors)
        found.repeat = repeat
        found.notes["operation"] = "order.refund_missing_discount"
        found.notes["provider_delay_ms"] = config.provider_delay_ms
        run.scaling.append(_record(found))
    await asyncio.to_thread(r.stack.remove_executors)
    await r.windows.close(_quiet_all(r))


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
        if config.profile:
            ids = await _ready(r, r.signoff.prepare(config.n))
            run.profile = await profile_batch(r, config, run, ids)
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
