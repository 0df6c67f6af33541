"""The soak run (``make soak``): signoff under a steady mixed load for minutes, sampled each one.

Proposals are proposed through the agent's machine-facing endpoint at a fixed rate (open loop,
``BENCH_SOAK_RATE`` per second; by default half the highest rate that held p99 ≤ 100 ms in the
last committed ``make bench`` run, ``docs/benchmarks.json``). Each is then, by its index, approved
(14 in 20), declined (3 in 20) or left to lapse (3 in 20: its ``expires_at`` is moved to now, so
the proposals service's own sweep, run every second here, expires it). Every
``BENCH_SOAK_SAMPLE_S`` seconds a row is taken: approve→outcome p50/p99 of the outcomes recorded
since the last row (the database clock of the recording statement), each service's resident
memory and open file descriptors, its PostgreSQL connections (the pool in use), and the rows in
every outbox and inbox table (kept two minutes here, ``RETENTION_ENV``, so that they level
off within the run). At the end every proposal must have reached the status its fate
asks for (none lost) and every approved broadcast form must carry exactly one applied revision
(none applied twice); these are counted from the database directly, since the fault checker's
counters live under ``tests/`` and the bench may not import tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import structlog

from signoff_bench.client import Connection, HttpError
from signoff_bench.driver import percentile
from signoff_bench.results import highest_held, spread
from signoff_bench.rig import Rig, rig
from signoff_bench.seeding import KIND, add_forms, draft
from signoff_bench.settings import REPO, load

log = structlog.get_logger(__name__)
BEGIN, END = "<!-- soak:begin -->", "<!-- soak:end -->"
SERVICES = ("agent", "proposals", "executor", "reconciler")
SOAK_ENV = {"SIGNOFF_PROPOSALS__EXPIRY_INTERVAL_S": "1"}
#: bookkeeping (sent outbox rows, inbox rows) kept two minutes and pruned every ten seconds, in
#: every service: the tables then level off within the run, at about the rate times the window,
#: which is what the soak shows. With the defaults (seven days) they level off a week in.
RETENTION_ENV = {
    "SIGNOFF_RETENTION__OUTBOX_S": "120",
    "SIGNOFF_RETENTION__INBOX_S": "120",
    "SIGNOFF_RETENTION__INTERVAL_S": "10",
}
#: a proposal's fate by its index modulo 20
APPROVE, DECLINE = range(14), range(14, 17)
FALLBACK_RATE = 5.0


@dataclass(frozen=True, slots=True)
class SoakConfig:
    minutes: float
    rate: float
    rate_source: str
    sample_s: float
    doc: Path | None
    json_out: Path | None


def load_soak() -> SoakConfig:
    minutes = float(os.environ.get("BENCH_SOAK_MINUTES", "20"))
    given = os.environ.get("BENCH_SOAK_RATE", "")
    rate, source = _rate(given)
    doc = os.environ.get("BENCH_SOAK_DOC", str(REPO / "docs" / "benchmarks.md"))
    json_out = os.environ.get("BENCH_SOAK_JSON", str(REPO / "docs" / "soak.json"))
    return SoakConfig(
        minutes=minutes,
        rate=rate,
        rate_source=source,
        sample_s=float(os.environ.get("BENCH_SOAK_SAMPLE_S", "60")),
        doc=Path(doc) if doc else None,
        json_out=Path(json_out) if json_out else None,
    )


def _rate(given: str, committed: Path = REPO / "docs" / "benchmarks.json") -> tuple[float, str]:
    """The soak's rate: as given, else half the median over the committed run's repeats of the
    highest open-loop rate that held (a repeat where none held counts as 0, as in the report)."""
    if given:
        return float(given), "BENCH_SOAK_RATE"
    try:
        steps = json.loads(committed.read_text())["open_loop"]
    except (OSError, KeyError, ValueError):
        return FALLBACK_RATE, "fallback (no committed open-loop result)"
    held = spread(
        highest_held(
            ((st["side"], st["repeat"], float(st["rate"]), st["held"]) for st in steps), "signoff"
        )
    )
    if held is None or held[0] == 0:
        return FALLBACK_RATE, "fallback (no open-loop rate held)"
    best = held[0]
    return max(1.0, best / 2), f"half the committed open-loop result ({best:.0f}/s)"


@dataclass
class Sample:
    minute: float
    proposed: int
    recorded: int
    p50_ms: float
    p99_ms: float
    rss_mb: dict[str, float]
    fds: dict[str, int]
    pg_connections: dict[str, int]
    outbox_rows: int
    inbox_rows: int


@dataclass
class SoakRun:
    config: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)
    fates: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    duplicated: int = 0
    failed_requests: int = 0
    #: what failed, by request and status (``approve 409``)
    failures: dict[str, int] = field(default_factory=dict)
    machine_load: list[float] = field(default_factory=list)


@dataclass
class _Sent:
    pid: str
    fate: str
    form: str
    decided: float = 0.0


async def _one(
    r: Rig, index: int, form: str, conns: dict[str, Connection], pool: asyncpg.Pool
) -> _Sent | str:
    """Propose, then approve, decline or lapse; what failed (``propose 503``) otherwise."""
    slot = index % 20
    fate = "approve" if slot in APPROVE else "decline" if slot in DECLINE else "expire"
    body = {"resource_id": form, "request": draft(index, r.signoff.club.segment_ids)}
    status, answer = await conns["agent"].request(
        "POST", f"/v1/operations/{KIND}/propose", json.dumps(body).encode()
    )
    if status != 201:
        return f"propose {status}"
    sent = _Sent(json.loads(answer)["proposal"]["id"], fate, form, time.time())
    if fate == "expire":
        async with pool.acquire() as conn:
            await conn.execute(
                "UPDATE proposals.proposals SET expires_at = statement_timestamp() WHERE id = $1",
                sent.pid,
            )
        return sent
    status, _ = await conns["proposals"].request("POST", f"/v1/proposals/{sent.pid}/{fate}")
    return sent if status < 300 else f"{fate} {status}"


def _pg_sockets() -> set[str]:
    """Inodes of TCP sockets whose remote end is PostgreSQL's port (5432)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as lines:
                next(lines)
                for line in lines:
                    parts = line.split()
                    if parts[2].rsplit(":", 1)[1] == "1538":  # 5432 in hex
                        found.add(parts[9])
        except OSError:
            continue
    return found


def _process(pid: int, pg: set[str]) -> tuple[float, int, int]:
    """(resident MB, open descriptors, PostgreSQL connections) of one process."""
    rss = 0.0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024.0
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0.0, 0, 0
    connections = 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in pg:
            connections += 1
    return rss, len(fds), connections


async def _tables(r: Rig) -> tuple[int, int]:
    rows = await r.probe.fetch(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_name IN ('outbox', 'inbox')"
    )
    counts = {"outbox": 0, "inbox": 0}
    for row in rows:
        counts[row["table_name"]] += int(
            await r.probe.fetchval(
                f'SELECT count(*) FROM "{row["table_schema"]}"."{row["table_name"]}"'  # noqa: S608
            )
        )
    return counts["outbox"], counts["inbox"]


async def _sample(r: Rig, started: float, sent: list[_Sent], since: float) -> Sample:
    approved = [s for s in sent if s.fate == "approve"]
    rows = await r.probe.fetch(
        "SELECT id, extract(epoch FROM outcome_at)::float8 AS at FROM proposals.proposals "
        "WHERE id = ANY($1::text[]) AND outcome_at >= to_timestamp($2)",
        [s.pid for s in approved],
        since,
    )
    decided = {s.pid: s.decided for s in approved}
    latencies = [row["at"] - decided[row["id"]] for row in rows]
    pg = _pg_sockets()
    pids = r.stack.pids()
    seen = {name: _process(pids[name], pg) for name in SERVICES if name in pids}
    outbox, inbox = await _tables(r)
    return Sample(
        minute=round((time.time() - started) / 60.0, 2),
        proposed=len(sent),
        recorded=len(latencies),
        p50_ms=percentile(latencies, 50) * 1000.0,
        p99_ms=percentile(latencies, 99) * 1000.0,
        rss_mb={k: round(v[0], 1) for k, v in seen.items()},
        fds={k: v[1] for k, v in seen.items()},
        pg_connections={k: v[2] for k, v in seen.items()},
        outbox_rows=outbox,
        inbox_rows=inbox,
    )


async def soak(config: SoakConfig) -> SoakRun:
    bench = load()
    run = SoakRun(
        config={k: str(v) for k, v in asdict(config).items() if k not in ("doc", "json_out")}
    )
    async with rig(bench, sides=False) as r:
        for name in SERVICES:
            extra = SOAK_ENV if name == "proposals" else {}
            await asyncio.to_thread(r.stack.restart, name, extra | RETENTION_ENV)
        pool = await asyncpg.create_pool(r.db.dsn, min_size=1, max_size=4)
        total = int(config.rate * config.minutes * 60)
        forms = await add_forms(r.loader, r.signoff.club.organization_id, total)
        sent: list[_Sent] = []
        idle: list[dict[str, Connection]] = []
        tasks: set[asyncio.Task[None]] = set()

        async def launch(index: int) -> None:
            conns = idle.pop() if idle else None
            if conns is None:
                conns = {
                    name: Connection(r.stack.url(name), r.signoff.club.headers)
                    for name in ("agent", "proposals")
                }
            try:
                done = await _one(r, index, forms[index], conns, pool)
            except (OSError, HttpError, asyncio.IncompleteReadError) as exc:
                done = type(exc).__name__
                for conn in conns.values():
                    await conn.close()
            if isinstance(done, str):
                run.failed_requests += 1
                run.failures[done] = run.failures.get(done, 0) + 1
            else:
                sent.append(done)
            idle.append(conns)

        started = time.time()
        marks = [started]

        async def sampler() -> None:
            while True:
                await asyncio.sleep(marks[-1] + config.sample_s - time.time())
                now = time.time()
                row = await _sample(r, started, sent, marks[-1])
                marks.append(now)
                run.samples.append(row)
                log.info("soak.sample", **asdict(row))

        sampling = asyncio.create_task(sampler())
        for index in range(total):
            delay = started + index / config.rate - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(launch(index))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
        sampling.cancel()  # the probe is one connection: nothing else may use it meanwhile
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
        await _settle(r, sent)
        run.samples.append(await _sample(r, started, sent, marks[-1]))
        await _account(r, run, sent)
        for conns in idle:
            for conn in conns.values():
                await conn.close()
        await pool.close()
    run.machine_load = list(os.getloadavg())
    return run


async def _settle(r: Rig, sent: list[_Sent], timeout: float = 300.0) -> None:
    """Until every proposal has left ``pending``/``executing`` (or the deadline passes)."""
    deadline = time.monotonic() + timeout
    ids = [s.pid for s in sent]
    while time.monotonic() < deadline:
        open_ = await r.probe.fetchval(
            "SELECT count(*) FROM proposals.proposals WHERE id = ANY($1::text[]) "
            "AND status IN ('pending', 'executing', 'approved')",
            ids,
        )
        if not open_:
            return
        await asyncio.sleep(0.5)


async def _account(r: Rig, run: SoakRun, sent: list[_Sent]) -> None:
    """Lost: a proposal not in the status its fate asks for. Duplicated: an approved form whose
    revision is not exactly one, or applied by another proposal."""
    want = {"approve": "succeeded", "decline": "declined", "expire": "expired"}
    rows = await r.probe.fetch(
        "SELECT id, status FROM proposals.proposals WHERE id = ANY($1::text[])",
        [s.pid for s in sent],
    )
    status = {row["id"]: row["status"] for row in rows}
    for s in sent:
        run.fates[s.fate] = run.fates.get(s.fate, 0) + 1
    run.lost = sum(1 for s in sent if status.get(s.pid) != want[s.fate])
    approved = {s.form: s.pid for s in sent if s.fate == "approve"}
    forms = await r.probe.fetch(
        "SELECT id, revision, applied_proposal_id FROM club.broadcast_forms "
        "WHERE id = ANY($1::text[])",
        list(approved),
    )
    run.duplicated = sum(
        1
        for f in forms
        if f["revision"] > 1 or f["applied_proposal_id"] not in (None, approved[f["id"]])
    )


def markdown(run: SoakRun) -> str:
    c = run.config
    header = [
        "minute",
        "proposed",
        "outcomes",
        "p50 / p99 ms",
        *(f"{s} RSS MB" for s in SERVICES),
        *(f"{s} fds" for s in SERVICES),
        "PG connections (a · p · e · r)",
        "outbox rows",
        "inbox rows",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in run.samples:
        lines.append(
            "| "
            + " | ".join(
                [
                    f"{s.minute:.1f}",
                    str(s.proposed),
                    str(s.recorded),
                    f"{s.p50_ms:.0f} / {s.p99_ms:.0f}",
                    *(f"{s.rss_mb.get(n, 0):.0f}" for n in SERVICES),
                    *(str(s.fds.get(n, 0)) for n in SERVICES),
                    " · ".join(str(s.pg_connections.get(n, 0)) for n in SERVICES),
                    str(s.outbox_rows),
                    str(s.inbox_rows),
                ]
            )
            + " |"
        )
    fates = ", ".join(f"{k} {v}" for k, v in sorted(run.fates.items()))
    return "\n".join(
        [
            BEGIN,
            f"{c['minutes']} minutes at {float(c['rate']):.1f} proposals/s "
            f"({c['rate_source']}), sampled every {c['sample_s']} s; load average at the end "
            + ", ".join(f"{x:.2f}" for x in run.machine_load)
            + ".",
            "",
            *lines,
            "",
            f"Proposals by fate: {fates}. Lost: **{run.lost}**, duplicated: "
            f"**{run.duplicated}**, requests that failed: {run.failed_requests}"
            + (
                " (" + ", ".join(f"{k}: {v}" for k, v in sorted(run.failures.items())) + ")"
                if run.failures
                else ""
            )
            + ".",
            "",
            "RSS per service over the run:",
            "",
            "```",
            *ascii_plot(run),
            "```",
            END,
        ]
    )


def ascii_plot(run: SoakRun, width: int = 50) -> list[str]:
    """One bar per sample and service: resident memory, scaled to the largest figure."""
    top = max((v for s in run.samples for v in s.rss_mb.values()), default=0.0) or 1.0
    out = []
    for s in run.samples:
        for name in SERVICES:
            mb = s.rss_mb.get(name, 0.0)
            out.append(
                f"{s.minute:6.1f} {name:<10} {'#' * round(width * mb / top):<{width}} {mb:.0f}"
            )
    return out


def write_doc(run: SoakRun, path: Path) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    block = markdown(run)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Soak\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def main() -> None:
    config = load_soak()
    run = asyncio.run(soak(config))
    sys.stdout.write(markdown(run) + "\n")
    if config.json_out is not None:
        config.json_out.write_text(json.dumps(asdict(run), indent=2, default=str))
    if config.doc is not None:
        write_doc(run, config.doc)
    if run.lost or run.duplicated:
        raise SystemExit(f"soak: {run.lost} lost, {run.duplicated} duplicated")


if __name__ == "__main__":
    main()
