"""Everything one run needs, set up in order and torn down whatever happens.

A database and a queue prefix of the run's own on the local servers (or those that
``SIGNOFF_TEST_PG_URL`` / ``SIGNOFF_TEST_AMQP_URL`` name), signoff's processes, the raw program's
and LangGraph's, the measuring ``Windows`` over all of them, and the club data proposals act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import structlog
from signoff_runtime.testing import servers
from signoff_runtime.topology import Topology

from signoff_bench import infra, resources
from signoff_bench.peer_side import PeerSide
from signoff_bench.raw_side import RawSide
from signoff_bench.seeding import seed_club
from signoff_bench.settings import BenchConfig
from signoff_bench.signoff_side import SignoffSide
from signoff_bench.stack import SMOKE_ENV, SMOKE_POOL, SignoffStack
from signoff_bench.window import Windows

log = structlog.get_logger(__name__)


@dataclass
class Rig:
    db: infra.Database
    amqp_url: str
    loader: asyncpg.Connection
    counters: infra.Counters
    log_dir: Path
    stack: SignoffStack
    signoff: SignoffSide
    raw: RawSide
    peer: PeerSide
    probe: infra.Probe
    windows: Windows

    def pids(self) -> dict[str, int]:
        return {**self.stack.pids(), **self.raw.pids(), **self.peer.pids()}

    def peak_rss(self) -> dict[str, float]:
        return {
            name: mb
            for name, pid in self.pids().items()
            if (mb := resources.peak_rss_mb(pid)) is not None
        }


@asynccontextmanager
async def rig(
    config: BenchConfig, *, sides: bool = True, env: Mapping[str, str] | None = None
) -> AsyncIterator[Rig]:
    """``sides=False``: signoff alone (the soak run, the timeline); the raw program and LangGraph
    not started. ``env`` is added to signoff's processes' environment (the timeline's exporter)."""
    with ExitStack() as exits:
        pg_url, amqp_url = servers.postgres_url(exits), servers.amqp_url(exits)
    started = time.monotonic()
    db = await infra.create_database(pg_url)
    log.info("bench.database_created", seconds=round(time.monotonic() - started, 1))
    log_dir = Path(tempfile.mkdtemp(prefix="signoff-bench-"))
    log.info("bench.setup", database=db.name, logs=str(log_dir))
    loader = await asyncpg.connect(db.dsn)
    probe = await infra.Probe.open(db)
    counters = await infra.Counters.open(db)
    stack = SignoffStack(
        db.url, amqp_url, f"b{secrets.token_hex(4)}", log_dir, config.provider_delay_ms
    )
    stack.env.update((SMOKE_ENV if config.smoke else {}) | dict(env or {}))
    pool_max = SMOKE_POOL if config.smoke else None
    raw = RawSide(db, amqp_url, log_dir, loader, probe, pool_max=pool_max)
    peer = PeerSide(db, log_dir, loader, probe, config.peer_processes, pool_max=pool_max)
    try:
        started = time.monotonic()
        await asyncio.to_thread(stack.start)
        log.info("bench.signoff_started", seconds=round(time.monotonic() - started, 1))
        schemas = await loader.fetch(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'outbox'"
        )
        signoff = SignoffSide(
            stack,
            loader,
            probe,
            await seed_club(stack.env),
            sorted(r["table_schema"] for r in schemas),
        )
        if sides:
            await raw.start()
            await peer.start()
        log.info("bench.peers_started", seconds=round(time.monotonic() - started, 1))
        windows = Windows(
            counters,
            lambda: {**stack.pids(), **raw.pids(), **peer.pids()},
            resources.pids_named("beam.smp"),
        )
        try:
            yield Rig(
                db,
                amqp_url,
                loader,
                counters,
                log_dir,
                stack,
                signoff,
                raw,
                peer,
                probe,
                windows,
            )
        finally:
            windows.stop()
    finally:
        await peer.stop()
        await raw.stop()
        await asyncio.to_thread(stack.stop)
        with contextlib.suppress(Exception):
            await _delete_topology(amqp_url, stack.prefix)
        for closing in (probe.close(), counters.close(), loader.close()):
            with contextlib.suppress(Exception):
                await closing
        if not config.keep_database:
            await infra.drop_database(db)


async def _delete_topology(amqp_url: str, prefix: str) -> None:
    import aio_pika

    connection = await aio_pika.connect(amqp_url)
    async with connection:
        await Topology(prefix).delete(await connection.channel())
