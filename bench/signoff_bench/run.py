"""The run. Each repeat's batches are prepared first (proposals proposed, LangGraph threads
started) in a window of its own that is thrown away, then measured back to back: at each concurrency
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
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import structlog

from signoff_bench import infra, machine, profile, report
from signoff_bench.growth import Growth, visits
from signoff_bench.raw_side import MINIMAL, Plan
from signoff_bench.results import Batch, Run, open_step
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
        order = [*RESUME, *CYCLE]
        if repeat % 2:
            order.reverse()
        prepared = {(side, c): await _prepare(r, side, n) for c in levels for side in order}
        await r.windows.close(_quiet_all(r))  # the preparation's window is discarded
        for c in levels:
            for side in order:
                found = await _measure(r, side, c, prepared[side, c], plans)
                if found is not None:
                    found.repeat = repeat
                    run.batches.append(_record(found))
        await open_loop(r, config, run, repeat)
        await scale(r, config, run, repeat)


RESUME = ("signoff", "raw", "raw-minimal", "langgraph")
CYCLE = ("signoff-cycle", "langgraph-cycle")


async def _prepare(r: Rig, side: str, n: int) -> list[str]:
    if side == "signoff":
        return await r.signoff.prepare(n)
    if side in ("raw", "raw-minimal"):
        return await r.raw.prepare(n)
    if side == "langgraph":
        return await r.peer.prepare(n)
    if side == "signoff-cycle":
        return await r.signoff.prepare_forms(n)
    return await r.peer.prepare_forms(n)


async def _measure(
    r: Rig, side: str, c: int, ids: list[str], plans: dict[int, Plan]
) -> Batch | None:
    if side == "signoff":
        found = await r.signoff.measure(r.windows, ids, c)
        plans[c] = Plan(
            commits=found.commits_per_proposal,
            messages=found.messages_per_proposal or 0.0,
            message_bytes=int(found.notes["message_bytes"]),
        )
        return found
    if side in ("raw", "raw-minimal"):
        # raw matches signoff's figures: this repeat's, or the last one's when raw goes first
        plan = MINIMAL if side == "raw-minimal" else plans.get(c)
        return None if plan is None else await r.raw.measure(r.windows, ids, c, plan, side)
    if side == "langgraph":
        return await r.peer.measure(r.windows, ids, c)
    if side == "signoff-cycle":
        return await r.signoff.cycle(r.windows, ids, c)
    return await r.peer.cycle(r.windows, ids, c)


def _quiet_all(r: Rig) -> Callable[[], Awaitable[bool]]:
    async def quiet() -> bool:
        return await r.signoff.quiet() and await r.raw.quiet()

    return quiet


async def _until_quiet(r: Rig, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not await _quiet_all(r)():
        if time.monotonic() > deadline:
            raise AssertionError(f"the system did not go quiet within {timeout}s")
        await asyncio.sleep(0.1)


async def search_rates(
    rates: Sequence[float], refine: int, attempt: Callable[[float], Awaitable[bool]]
) -> None:
    """Offer ``rates`` in turn until one misses the bound, then halve the gap between the highest
    rate that held and the lowest that missed, ``refine`` times (whole rates per second). Fixed
    steps alone can report half what a side holds (25/s held, 50/s missed: 25 reported)."""
    low, high = 0.0, None
    for rate in rates:
        if not await attempt(rate):
            high = float(rate)
            break
        low = float(rate)
    if high is None:
        return
    for _ in range(refine):
        middle = float(round((low + high) / 2))
        if not low < middle < high:
            return
        if await attempt(middle):
            low = middle
        else:
            high = middle


async def open_loop(r: Rig, config: BenchConfig, run: Run, repeat: int) -> None:
    """Approvals offered at each rate for ``open_seconds``, stepped up until p99
    approve→outcome exceeds the bound, then the gap bisected (``search_rates``); signoff and
    raw-minimal, alternating first."""
    sides = ["signoff", "raw-minimal"][:: -1 if repeat % 2 else 1]
    for side in sides:

        async def attempt(rate: float, side: str = side) -> bool:
            n = max(1, int(rate * config.open_seconds))
            if side == "signoff":
                ids = await r.signoff.prepare(n)
                await _until_quiet(r)
                samples = await r.signoff.open_loop(ids, rate)
                done = await r.signoff.outcome_times(ids)
            else:
                ids = await r.raw.prepare(n)
                samples = await r.raw.open_loop(ids, rate)
                done = await r.raw.outcome_times(ids)
            await _until_quiet(r)
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
            return step.held

        await search_rates(config.open_rates, config.open_refine, attempt)
    await r.windows.close(_quiet_all(r))  # the open loop counts no commits or CPU: discarded


def keep_peaks(run: Run, r: Rig) -> None:
    """Each process's highest peak RSS so far into ``run``: a restarted service's new process
    counts from zero, so its predecessor's peak is kept before every restart."""
    for name, mb in r.peak_rss().items():
        run.peak_rss_mb[name] = max(run.peak_rss_mb.get(name, 0.0), mb)


async def scale(r: Rig, config: BenchConfig, run: Run, repeat: int) -> None:
    """Card refunds (the provider answering after ``provider_delay_ms``) at the highest
    concurrency with 1, 2, 4 ... executor processes; back to one executor afterwards.

    - **Each executor's window is ``scaling_window``** (``SIGNOFF_EXECUTOR__CONCURRENCY``; 0
      keeps the default of 32). With the default, one executor is never the limit on two cores:
      32 contracts of 100 ms each are 320/s of waiting, and the machine's CPU runs out far below
      that, so a second process only adds overhead. A small window makes each executor's window
      the limit, as it is for an executor with a core of its own; then more executors can only
      pay if nothing between them is shared and serial, which is what this batch is for.
    - **Warm before measured**: every executor configuration first handles an unmeasured batch
      of half the size, so new processes' pools, prepared statements and caches are filled;
      the measured figure is the steady state, not a start-up.
    """
    top = config.scaling_concurrency
    window = (
        {"SIGNOFF_EXECUTOR__CONCURRENCY": str(config.scaling_window)}
        if config.scaling_window
        else {}
    )
    if window:
        keep_peaks(run, r)  # the restarted executor's count starts again
        await asyncio.to_thread(r.stack.restart, "executor", window)
    warm_n = max(top, config.n // 2)
    prepared = {
        e: (await r.signoff.prepare_refunds(warm_n), await r.signoff.prepare_refunds(config.n))
        for e in config.executors
    }
    for executors in sorted(config.executors):
        while r.stack.executors() < executors:
            await asyncio.to_thread(r.stack.add_executor, window)
        warm, measured = prepared[executors]
        await r.windows.close(_quiet_all(r))  # preparation and start-up are not measured
        await r.signoff.measure(r.windows, warm, top, executors)  # the warm-up: discarded
        await r.windows.close(_quiet_all(r))
        found = await r.signoff.measure(r.windows, measured, top, executors)
        found.repeat = repeat
        found.notes["operation"] = "order.refund_missing_discount"
        found.notes["provider_delay_ms"] = config.provider_delay_ms
        run.scaling.append(_record(found))
    await asyncio.to_thread(r.stack.remove_executors)
    if window:
        await asyncio.to_thread(r.stack.restart, "executor", {})
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
            # where the output went is not a figure (and no machine path belongs in the repo)
            config={k: str(v) for k, v in asdict(config).items() if k not in ("doc", "json_out")},
        )
        await compare(r, config, run)
        if config.profile:
            ids = await r.signoff.prepare(config.n)
            await r.windows.close(_quiet_all(r))
            run.profile = await profile_batch(r, config, run, ids)
        keep_peaks(run, r)  # growth restarts the proposals service
        growth = Growth(r, config.growth_samples)
        await growth.start()
        for stored in visits(config.growth):
            row = await growth.measure(stored)
            log.info("bench.growth", **asdict(row))
            run.growth.append(row)
        keep_peaks(run, r)
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
