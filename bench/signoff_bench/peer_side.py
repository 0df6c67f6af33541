"""The LangGraph side: start → interrupt (prepared, untimed), then resume over HTTP (measured).

A resumed graph has finished — mutation done, checkpoint stored — when its approve request is
answered, so its approval→outcome latency is the request's own duration. Its commits per
proposal come from the same database counter as the other sides'; it sends no messages.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from signoff_runtime.testing.processes import ServiceProcess, free_port

from signoff_bench.client import Connection
from signoff_bench.driver import Sample, approve_all, cycle_all
from signoff_bench.infra import Database, Probe
from signoff_bench.peer.graph import DDL, SCHEMA
from signoff_bench.results import Batch, batch
from signoff_bench.settings import REPO
from signoff_bench.window import Windows

START_CONCURRENCY = 8


@dataclass
class PeerSide:
    db: Database
    log_dir: Path
    loader: asyncpg.Connection
    probe: Probe
    count: int
    #: a cap on the processes' pools together (the smoke run's ``SMOKE_POOL``)
    pool_max: int | None = None
    port: int = field(default_factory=free_port)
    processes: dict[str, ServiceProcess] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        await self.loader.execute(DDL)
        async with AsyncPostgresSaver.from_conn_string(self.db.dsn) as saver:
            await saver.setup()
        env = {
            "BENCH_PEER_DSN": self.db.dsn,
            "BENCH_PEER_PORT": str(self.port),
            "PYTHONPATH": str(REPO / "bench"),
            # signoff's proposals service has a pool of 10: so do the peer processes together
            "BENCH_PEER_POOL": str(max(2, min(10, self.pool_max or 10) // self.count)),
        }
        for i in range(1, self.count + 1):
            health = free_port()
            proc = ServiceProcess(
                f"langgraph-{i}",
                [sys.executable, "-m", "signoff_bench.peer"],
                {**env, "BENCH_PEER_HEALTH_PORT": str(health)},
                health,
                self.log_dir,
            )
            self.processes[proc.name] = proc.start()
            await asyncio.to_thread(proc.wait_healthy, 60.0)

    async def stop(self) -> None:
        for proc in self.processes.values():
            proc.stop()

    def pids(self) -> dict[str, int]:
        return {name: p.proc.pid for name, p in self.processes.items() if p.proc is not None}

    async def prepare_forms(self, n: int) -> list[str]:
        """Threads whose forms exist, not yet started (a full-cycle batch starts them)."""
        ids = [f"lg{secrets.token_hex(8)}" for _ in range(n)]
        await self.loader.copy_records_to_table(
            "forms", schema_name=SCHEMA, columns=["id"], records=[(f"f{t}",) for t in ids]
        )
        return ids

    async def prepare(self, n: int) -> list[str]:
        ids = await self.prepare_forms(n)
        pending = iter(ids)

        async def worker() -> None:
            conn = Connection(self.url)
            try:
                for thread_id in pending:
                    status, answer = await conn.request(
                        "POST", f"/v1/proposals/{thread_id}/start", _draft(thread_id)
                    )
                    if status != 200:
                        raise RuntimeError(f"LangGraph start answered {status}: {answer!r}")
            finally:
                await conn.close()

        await asyncio.gather(*(worker() for _ in range(START_CONCURRENCY)))
        return ids

    async def cycle(self, windows: Windows, ids: list[str], concurrency: int) -> Batch:
        """start → interrupt → resume per thread, timed from the start request to the resumed
        graph's answer; a request that failed is counted in ``failed``, not dropped."""

        async def start(conns: Mapping[str, Connection], thread: str) -> tuple[int, str]:
            status, _ = await conns["peer"].request(
                "POST", f"/v1/proposals/{thread}/start", _draft(thread)
            )
            return status, thread

        async def resume(conns: Mapping[str, Connection], thread: str) -> tuple[int, str]:
            status, _ = await conns["peer"].request("POST", f"/v1/proposals/{thread}/approve")
            return status, thread

        samples = await cycle_all({"peer": self.url}, {}, ids, [start, resume], concurrency)
        return await self._batch("langgraph-cycle", windows, ids, concurrency, samples)

    async def measure(self, windows: Windows, ids: list[str], concurrency: int) -> Batch:
        samples = await approve_all(
            self.url, {}, [(t, f"/v1/proposals/{t}/approve") for t in ids], concurrency
        )
        return await self._batch("langgraph", windows, ids, concurrency, samples)

    async def _batch(
        self, side: str, windows: Windows, ids: list[str], concurrency: int, samples: list[Sample]
    ) -> Batch:
        spent = await windows.close(_quiet)
        applied = await self.probe.fetchval(
            f"SELECT count(*) FROM {SCHEMA}.forms "  # noqa: S608
            "WHERE applied_thread = ANY($1::text[])",
            ids,
        )
        return batch(
            side,
            concurrency,
            samples,
            {s.key: s.answered for s in samples if s.status == 200},
            spent,
            messages=None,
            ok=int(applied),
            processes=self.pids(),
            broker=False,
        )


def _draft(thread_id: str) -> bytes:
    draft = {"form_id": f"f{thread_id}", "subject": "Spring bonspiel"}
    return json.dumps({**draft, "body": "Teams of four, all levels. " * 8}).encode()


async def _quiet() -> bool:
    return True
