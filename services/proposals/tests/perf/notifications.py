"""A burst of proposal events: what the notifier costs, by batch size (issue 18, group commit).

``.venv/bin/python services/proposals/tests/perf/notifications.py`` makes a fresh database and
queue prefix, then starts the proposals service as its own process (the tests' toy domain
plugged in) once per round, with ``SIGNOFF_AMQP__BATCH_SIZE`` taking each of
``BENCH_BATCH_SIZES`` (default ``1,32``) in turn, ``BENCH_REPEATS`` times (default 3), the sizes
alternating in one run. Each round proposes one toy credit, copies its ``created`` event into
``BENCH_N`` (default 2000) events under message ids of their own, ``BENCH_ORGS`` (default 20)
organizations' worth, publishes them all at once to the events exchange and waits until the
service's notifier has settled every one. Nobody subscribes to them: the common case, where the
notifier's work is to find that out. One line per round: events per second, the service's CPU
per event, the batches it took. Only ratios between the lines of one run mean anything.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time

import aio_pika
import asyncpg
import httpx
from approvals import (  # puts support/ on sys.path
    alternate,
    cpu_seconds,
    propose_one,
    start_service,
)
from proposals_testkit import enrol
from signoff_conformance.toy.domain import open_account
from signoff_contracts.ids import new_id
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.settings import AuthSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import create_async_engine

QUEUE = "proposals.notifications"


async def _round(url: str, amqp_url: str, topology: Topology, size: int, n: int, orgs: int) -> str:
    auth = AuthSettings()
    engine = create_async_engine(url)
    org = f"org_{secrets.token_hex(4)}"
    proposer = issue_token(auth, await enrol(engine, org), org)
    account = await open_account(engine, org, "Ada's Bakery")
    await engine.dispose()
    proc = start_service(url, amqp_url, topology, {"SIGNOFF_AMQP__BATCH_SIZE": str(size)})
    db = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await asyncio.to_thread(proc.wait_healthy, 90.0)
        assert proc.proc is not None
        original = await propose_one(amqp_url, topology, proposer, account)
        body = await db.fetchval(
            "SELECT body FROM proposals.outbox WHERE correlation_id = $1 "
            "AND routing_key = 'proposal.created'",
            original,
        )
        await _settled(proc.url, 1)  # the original, relayed and handled
        event = json.loads(body)
        copies = []
        for i in range(n):
            event["message_id"] = new_id("msg")
            event["proposal"]["organization_id"] = f"{org}_{i % orgs}"
            copies.append(json.dumps(event).encode())
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel()
            exchange = await channel.get_exchange(topology.exchange("events").name)
            spent, started = cpu_seconds(proc.proc.pid), time.monotonic()
            await asyncio.gather(
                *(
                    exchange.publish(
                        aio_pika.Message(
                            copy, user_id=connection.url.user, content_type="application/json"
                        ),
                        "proposal.created",
                    )
                    for copy in copies
                )
            )
            await _settled(proc.url, 1 + n)
            seconds = time.monotonic() - started
            spent = cpu_seconds(proc.proc.pid) - spent
        batches = await _metric(proc.url, "signoff_consumer_batch_size_count")
    finally:
        await db.close()
        await asyncio.to_thread(proc.stop)
    return (
        f"batch_size={size} n={n} orgs={orgs} {n / seconds:.0f} events/s "
        f"service_cpu={1000 * spent / n:.3f} ms/event batches={batches:.0f}"
    )


async def _metric(url: str, name: str, result: str = "") -> float:
    """The notifier's ``name`` sample (``result`` its label, if any) on the service's /metrics."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        text = (await http.get(f"{url}/metrics")).text
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and f'queue="{QUEUE}"' in line and result in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def _settled(url: str, count: int) -> None:
    async def done() -> bool:
        return await _metric(url, "signoff_messages_consumed_total", 'result="ok"') >= count

    await wait_until(done, timeout=300.0, interval=0.05, what=f"{count} events settled")


async def main() -> None:
    n = int(os.environ.get("BENCH_N", "2000"))
    orgs = int(os.environ.get("BENCH_ORGS", "20"))

    async def one_round(url: str, amqp_url: str, topology: Topology, size: int) -> str:
        return await _round(url, amqp_url, topology, size, n, orgs)

    await alternate(one_round)


if __name__ == "__main__":
    asyncio.run(main())
