"""A burst of outcomes: how fast the proposals service records it, by batch size (issue 18).

``PYTHONPATH=bench .venv/bin/python -m signoff_bench.batches`` starts the proposals service as
its own process (``signoff serve proposals``, as the stack does) once per round, with
``SIGNOFF_AMQP__BATCH_SIZE`` taking each of ``BENCH_BATCH_SIZES`` (default ``1,32``) in turn,
``BENCH_REPEATS`` times (default 3), so the sizes alternate in one run on one loaded machine.
Each round writes ``BENCH_N`` (default 400) proposals straight into ``executing`` (the claim is
not what is measured), publishes one ``OutcomeReported`` for each as fast as the broker confirms
them, and waits until every one has its outcome. One line per round: outcomes per second from
the first publish to the last recorded, the service's CPU per outcome, and the database's
commits per outcome (``xact_commit``, read once the counters have flushed: the outbox relay's
commits count too). Only ratios between the lines of one run mean anything.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import aio_pika
import asyncpg
from faststream.rabbit import RabbitBroker
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.v1 import OutcomeReported
from signoff_runtime.settings import broker_user
from signoff_runtime.testing import servers
from signoff_runtime.testing.processes import service, stack_env
from signoff_runtime.topology import ROUTING_KEYS, Topology

from signoff_bench import infra, resources

_SEED = (
    "INSERT INTO proposals.proposals (id, organization_id, requested_by, section, resource_id, "
    "operation_kind, contract_version, request, arguments, preview, status, expires_at, "
    "decided_by, decided_at, contract_id, execute_by) "
    "SELECT 'prp_b' || $1 || 'x' || i, 'org_bench', 'usr_bench', 'bench', 'res_' || i, "
    "'bench.op', 1, '{}', '{}', '{}', 'executing', now() + interval '1 hour', 'usr_bench', now(), "
    "'ctr_b' || $1 || 'x' || i, now() + interval '1 hour' FROM generate_series(1, $2) AS i"
)


async def _round(
    db: infra.Database,
    counters: infra.Counters,
    amqp_url: str,
    topology: Topology,
    size: int,
    n: int,
    log_dir: Path,
) -> str:
    tag = secrets.token_hex(3)
    loader = await asyncpg.connect(db.dsn)
    try:
        await loader.execute(_SEED, tag, n)
    finally:
        await loader.close()
    env = stack_env(db.url, amqp_url, topology.prefix, quick=False)
    env |= {"SIGNOFF_AMQP__BATCH_SIZE": str(size), "SIGNOFF_PROPOSALS__STUCK_AFTER_S": "3600"}
    proc = service("proposals", env, log_dir).start()
    try:
        await asyncio.to_thread(proc.wait_healthy, 90.0)
        assert proc.proc is not None
        await asyncio.sleep(infra.FLUSH_S)  # start-up's commits flushed before the count
        commits, cpu = await counters.commits(), resources.cpu_seconds(proc.proc.pid) or 0.0
        reports = [
            OutcomeReported(
                proposal_id=f"prp_b{tag}x{i}",
                contract_id=f"ctr_b{tag}x{i}",
                operation_kind="bench.op",
                outcome=Succeeded(result={"i": i}),
                correlation_id=new_id("cor"),
            )
            for i in range(1, n + 1)
        ]
        started = time.monotonic()
        async with RabbitBroker(amqp_url) as broker:
            await asyncio.gather(
                *(
                    broker.publish(
                        r.model_dump_json().encode(),
                        exchange=topology.name("outcomes"),
                        routing_key=ROUTING_KEYS["proposals.outcomes"],
                        message_id=r.message_id,
                        persist=True,
                        user_id=broker_user(amqp_url),
                    )
                    for r in reports
                )
            )
        await _recorded(db, tag, n)
        seconds = time.monotonic() - started
        spent = (resources.cpu_seconds(proc.proc.pid) or 0.0) - cpu
        await asyncio.sleep(infra.FLUSH_S)
        committed = await counters.commits() - commits
    finally:
        await asyncio.to_thread(proc.stop)
    return (
        f"batch_size={size} n={n} {n / seconds:.0f} outcomes/s "
        f"service_cpu={1000 * spent / n:.2f} ms/outcome commits={committed / n:.2f}/outcome"
    )


async def _recorded(db: infra.Database, tag: str, n: int, within: float = 600.0) -> None:
    conn = await asyncpg.connect(db.dsn)
    deadline = time.monotonic() + within
    try:
        while (
            await conn.fetchval(
                "SELECT count(*) FROM proposals.proposals WHERE id LIKE $1 AND status = "
                "'succeeded'",
                f"prp_b{tag}x%",
            )
            < n
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{n} outcomes not recorded within {within}s")
            await asyncio.sleep(0.02)
    finally:
        await conn.close()


async def main() -> None:
    n = int(os.environ.get("BENCH_N", "400"))
    sizes = [int(s) for s in os.environ.get("BENCH_BATCH_SIZES", "1,32").split(",")]
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    with ExitStack() as exits:
        pg_url, amqp_url = servers.postgres_url(exits), servers.amqp_url(exits)
        db = await infra.create_database(pg_url)
        counters = await infra.Counters.open(db)
        topology = Topology(f"b{secrets.token_hex(4)}", delivery_limit=3)
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            await topology.declare(await connection.channel())
        log_dir = Path(tempfile.mkdtemp(prefix="signoff-batches-"))
        try:
            for repeat in range(repeats):
                turn = sizes[repeat % len(sizes) :] + sizes[: repeat % len(sizes)]
                for size in turn:
                    line = await _round(db, counters, amqp_url, topology, size, n, log_dir)
                    sys.stdout.write(line + "\n")
                    sys.stdout.flush()
        finally:
            await counters.close()
            connection = await aio_pika.connect(amqp_url)
            async with connection:
                await topology.delete(await connection.channel())
            await infra.drop_database(db)


if __name__ == "__main__":
    asyncio.run(main())
