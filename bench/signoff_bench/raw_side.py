"""The raw limit's side: start its three processes, give each batch signoff's figures, measure.

signoff is measured first at each concurrency; its commits and messages per proposal (and the
mean size of its messages) become the raw batch's plan (``schema.share``), so both sides print
matching figures. The raw side's messages are counted where they are confirmed: each process
reports its confirmed publishes on ``/healthz``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
from signoff_runtime.testing.processes import ServiceProcess, free_port

from signoff_bench.driver import Sample, approve_all, offer
from signoff_bench.infra import Database, Probe, ready_messages
from signoff_bench.raw import schema
from signoff_bench.results import Batch, batch
from signoff_bench.settings import REPO
from signoff_bench.window import Windows

ROLES = ("front", "executor", "listener")
#: what the raw program commits and publishes per proposal before any extra is added
ESSENTIAL_COMMITS = 3  # claim, mutation, recorded outcome (+ one per event)
ESSENTIAL_MESSAGES = 2  # contract, outcome (+ the events)


@dataclass(frozen=True, slots=True)
class Plan:
    commits: float
    messages: float
    message_bytes: int


#: raw-minimal: the least the work needs, fixed whatever signoff does — a commit per stage
#: (claim; execute with its dedup row; record the outcome with its dedup row; the hand-back's
#: dedup row) and three persistent confirmed messages (contract, outcome, one event), unpadded
MINIMAL = Plan(commits=ESSENTIAL_COMMITS + 1, messages=ESSENTIAL_MESSAGES + 1, message_bytes=0)


@dataclass
class RawSide:
    db: Database
    amqp_url: str
    log_dir: Path
    loader: asyncpg.Connection
    probe: Probe
    #: a cap on each process's pool (the smoke run's ``SMOKE_POOL``); else ``POOL_SIZES``
    pool_max: int | None = None
    prefix: str = field(default_factory=lambda: f"raw{secrets.token_hex(3)}")
    processes: dict[str, ServiceProcess] = field(default_factory=dict)

    async def start(self) -> None:
        await self.loader.execute(schema.DDL)
        await schema.declare(self.amqp_url, self.prefix)
        env = {
            "BENCH_RAW_DSN": self.db.dsn,
            "BENCH_RAW_AMQP": self.amqp_url,
            "BENCH_RAW_PREFIX": self.prefix,
            "PYTHONPATH": str(REPO / "bench"),
        }
        if self.pool_max is not None:
            env["BENCH_RAW_POOL_MAX"] = str(self.pool_max)
        for role in ROLES:
            port = free_port()
            argv = [sys.executable, "-m", "signoff_bench.raw", role]
            proc = ServiceProcess(
                f"raw-{role}", argv, {**env, "BENCH_RAW_PORT": str(port)}, port, self.log_dir
            )
            self.processes[role] = proc.start()
        for proc in self.processes.values():
            await asyncio.to_thread(proc.wait_healthy, 60.0)

    async def stop(self) -> None:
        for proc in self.processes.values():
            proc.stop()
        await schema.declare(self.amqp_url, self.prefix, delete=True)

    def pids(self) -> dict[str, int]:
        return {f"raw-{r}": p.proc.pid for r, p in self.processes.items() if p.proc is not None}

    async def prepare(self, n: int) -> list[str]:
        ids = [f"raw{secrets.token_hex(8)}" for _ in range(n)]
        await schema.add_proposals(self.loader, ids)
        return ids

    async def _plan(self, plan: Plan) -> None:
        """Matched to signoff: its messages beyond contract and outcome are events; its commits
        beyond the raw program's own (claim, mutation, outcome, one per event) are extras."""
        events = max(0.0, plan.messages - ESSENTIAL_MESSAGES)
        extra = max(0.0, plan.commits - ESSENTIAL_COMMITS - events)
        body = {"extra": extra, "events": events, "bytes": plan.message_bytes}
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(f"{self.processes['front'].url}/_plan", json=body)
            response.raise_for_status()

    async def quiet(self) -> bool:
        names = [schema.queue_name(self.prefix, q) for q in schema.QUEUES]
        return await ready_messages(self.amqp_url, names) == 0

    async def published(self) -> int:
        total = 0
        async with httpx.AsyncClient(timeout=10) as http:
            for proc in self.processes.values():
                response = await http.get(f"{proc.url}/healthz")
                total += int(json.loads(response.content)["published"])
        return total

    async def open_loop(self, ids: list[str], rate: float) -> list[Sample]:
        """raw-minimal's approvals offered at ``rate``; samples keyed by id (scheduled time)."""
        await self._plan(MINIMAL)
        samples = await offer(
            self.processes["front"].url, {}, [(i, f"/v1/proposals/{i}/approve") for i in ids], rate
        )
        await self._until_recorded(ids)
        return samples

    async def outcome_times(self, ids: list[str]) -> dict[str, float]:
        rows = await self.probe.fetch(
            f"SELECT id, extract(epoch FROM outcome_at)::float8 AS at "  # noqa: S608
            f"FROM {schema.SCHEMA}.proposals WHERE id = ANY($1::text[])",
            ids,
        )
        return {r["id"]: r["at"] for r in rows if r["at"] is not None}

    async def measure(
        self,
        windows: Windows,
        ids: list[str],
        concurrency: int,
        plan: Plan,
        side: str = "raw",
    ) -> Batch:
        await self._plan(plan)
        before = await self.published()
        samples = await approve_all(
            self.processes["front"].url,
            {},
            [(pid, f"/v1/proposals/{pid}/approve") for pid in ids],
            concurrency,
        )
        await self._until_recorded(ids)
        spent = await windows.close(self.quiet)
        messages = await self.published() - before
        rows = await self.probe.fetch(
            f"SELECT id, status, extract(epoch FROM outcome_at)::float8 AS at "  # noqa: S608
            f"FROM {schema.SCHEMA}.proposals WHERE id = ANY($1::text[])",
            ids,
        )
        return batch(
            side,
            concurrency,
            samples,
            {r["id"]: r["at"] for r in rows if r["at"] is not None},
            spent,
            messages=messages,
            ok=sum(1 for r in rows if r["status"] == "succeeded"),
            processes=self.pids(),
        )

    async def _until_recorded(self, ids: list[str]) -> None:
        deadline = time.monotonic() + 60 + len(ids) / 2
        while time.monotonic() < deadline:
            done = await self.probe.fetchval(
                f"SELECT count(*) FROM {schema.SCHEMA}.proposals "  # noqa: S608
                "WHERE id = ANY($1::text[]) AND status = 'succeeded'",
                ids,
            )
            if done == len(ids):
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{len(ids)} raw proposals were not all recorded")
