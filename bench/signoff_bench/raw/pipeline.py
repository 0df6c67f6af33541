"""The raw program's three roles, one process each, mirroring the signoff services that handle
a proposal: ``front`` (proposals: the approve request and recording the outcome), ``executor``
(the local mutation) and ``listener`` (the agent: events handed back).

Per proposal: the claim, the mutation and the recorded outcome are one commit each, every
event is one commit at the listener, and the row's ``extra`` commits (single-row UPDATEs, the
kind an outbox relay makes marking rows sent) are spread over the four hops. Every message is
persistent and published with a confirm; consumers acknowledge after their commit. Pools keep
their connections without a reset query, and no framework sits anywhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aio_pika
import asyncpg

from signoff_bench.raw import httpd
from signoff_bench.raw.schema import SCHEMA, queue_name, share

HOPS = 4  # approve, execute, record, hand back
#: connections open as needed, up to signoff's pool size where the work is concurrent (the
#: executor never has more than its prefetch in flight); the server's connections are shared
POOL_SIZES = {"front": 10, "executor": 8, "listener": 5}
_APPROVE = re.compile(r"^/v1/proposals/([^/]+)/approve$")
_CLAIM = (
    f"UPDATE {SCHEMA}.proposals SET status = 'executing', decided_at = now() "  # noqa: S608
    "WHERE id = $1 AND status = 'pending' RETURNING id, form_id"
)
_MUTATE = (
    f"UPDATE {SCHEMA}.forms SET subject = $2, body = $3, revision = revision + 1, "  # noqa: S608
    "applied_proposal_id = $1, updated_at = now() WHERE id = $4"
)
_RECORD = (
    f"UPDATE {SCHEMA}.proposals SET status = 'succeeded', "  # noqa: S608
    "outcome_at = statement_timestamp() "
    "WHERE id = $1 AND status = 'executing'"
)
_DEDUP = f"INSERT INTO {SCHEMA}.inbox (message_id) VALUES ($1) ON CONFLICT DO NOTHING"  # noqa: S608
_TOUCH = f"UPDATE {SCHEMA}.proposals SET touched = touched + 1 WHERE id = $1"  # noqa: S608


async def _keep(_: asyncpg.Connection) -> None:
    """No reset on release: the pool hands the same session back (see dependencies.md)."""


@dataclass
class Node:
    pool: asyncpg.Pool
    connection: aio_pika.abc.AbstractConnection
    channel: aio_pika.abc.AbstractChannel
    prefix: str
    #: publishes the broker has confirmed (the raw side's message count)
    published: int = 0

    async def publish(self, short: str, kind: str, work: dict[str, Any], index: int = 0) -> None:
        """A persistent message the broker has confirmed, padded to signoff's message size."""
        body = {**work, "kind": kind, "index": index, "filler": ""}
        bare = len(json.dumps(body))
        body["filler"] = "x" * max(0, int(work["pad"]) - bare)
        raw = json.dumps(body).encode()
        await self.channel.default_exchange.publish(
            aio_pika.Message(
                raw,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                message_id=f"{work['id']}:{kind}:{index}",
                content_type="application/json",
            ),
            routing_key=queue_name(self.prefix, short),
            mandatory=True,
        )
        self.published += 1

    async def status(self, method: str, path: str, _: bytes) -> tuple[int, bytes]:
        if method == "GET" and path == "/healthz":
            return 200, json.dumps({"status": "ok", "published": self.published}).encode()
        return 404, b"{}"

    async def touch(self, work: dict[str, Any], hop: int) -> None:
        hops = HOPS if int(work["events"]) > 0 else HOPS - 1
        for _ in range(hop, int(work["extra"]), hops):
            async with self.pool.acquire() as conn:
                await conn.execute(_TOUCH, work["id"])

    async def consume(
        self, short: str, prefetch: int, work: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> None:
        channel = await self.connection.channel()
        await channel.set_qos(prefetch_count=prefetch)
        queue = await channel.get_queue(queue_name(self.prefix, short), ensure=False)

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            await work(json.loads(message.body))
            await message.ack()

        await queue.consume(on_message)


async def _events(node: Node, work: dict[str, Any], first: int, count: int) -> None:
    await asyncio.gather(
        *(node.publish("events", "event", work, index) for index in range(first, first + count))
    )


@dataclass
class Plan:
    """Per proposal on average: extra commits, events, and message size in bytes."""

    extra: float = 0.0
    events: float = 0.0
    size: int = 0
    claimed: int = 0

    def next(self) -> dict[str, int]:
        index, self.claimed = self.claimed, self.claimed + 1
        return {
            "extra": share(self.extra, index),
            "events": share(self.events, index),
            "pad": self.size,
        }


def front(node: Node) -> tuple[httpd.Handler, Callable[[], Awaitable[None]]]:
    plan = Plan()

    async def approve(method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if method == "POST" and path == "/_plan":
            given = json.loads(body)
            plan.extra, plan.events, plan.size = given["extra"], given["events"], given["bytes"]
            plan.claimed = 0
            return 200, b"{}"
        match = _APPROVE.match(path)
        if method != "POST" or match is None:
            return await node.status(method, path, body)
        async with node.pool.acquire() as conn:
            row = await conn.fetchrow(_CLAIM, match.group(1))
        if row is None:
            return 409, b'{"result":"not_approvable"}'
        work = {**dict(row), **plan.next()}
        early = work["events"] - work["events"] // 2
        await asyncio.gather(
            node.publish("contracts", "contract", work), _events(node, work, 0, early)
        )
        await node.touch(work, 0)
        return 200, json.dumps({"result": "claimed", "id": work["id"]}).encode()

    async def record(work: dict[str, Any]) -> None:
        async with node.pool.acquire() as conn, conn.transaction():
            await conn.execute(_DEDUP, f"{work['id']}:outcome")
            await conn.execute(_RECORD, work["id"])
        early = work["events"] - work["events"] // 2
        await _events(node, work, early, work["events"] // 2)
        await node.touch(work, 2)

    async def consumers() -> None:
        await node.consume("outcomes", 32, record)

    return approve, consumers


def executor(node: Node) -> Callable[[], Awaitable[None]]:
    async def execute(work: dict[str, Any]) -> None:
        async with node.pool.acquire() as conn, conn.transaction():
            await conn.execute(_DEDUP, f"{work['id']}:contract")
            await conn.execute(
                _MUTATE, work["id"], "Spring bonspiel", "Teams of four.", work["form_id"]
            )
        await node.publish("outcomes", "outcome", work)
        await node.touch(work, 1)

    async def consumers() -> None:
        await node.consume("contracts", 8, execute)

    return consumers


def listener(node: Node) -> Callable[[], Awaitable[None]]:
    async def hand_back(work: dict[str, Any]) -> None:
        async with node.pool.acquire() as conn:
            await conn.execute(_DEDUP, f"{work['id']}:event:{work['index']}")
        if int(work["index"]) == int(work["events"]) - 1:
            await node.touch(work, 3)

    async def consumers() -> None:
        await node.consume("events", 32, hand_back)

    return consumers


async def main(role: str) -> None:
    # the smoke run caps it (``BENCH_RAW_POOL_MAX``, ``RawSide.pool_max``)
    size = min(POOL_SIZES[role], int(os.environ.get("BENCH_RAW_POOL_MAX", POOL_SIZES[role])))
    pool = await asyncpg.create_pool(
        os.environ["BENCH_RAW_DSN"], min_size=1, max_size=size, reset=_keep
    )
    connection = await aio_pika.connect(os.environ["BENCH_RAW_AMQP"])
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    node = Node(pool, connection, channel, os.environ["BENCH_RAW_PREFIX"])
    handler: httpd.Handler = node.status
    if role == "front":
        handler, consumers = front(node)
    elif role == "executor":
        consumers = executor(node)
    else:
        consumers = listener(node)
    await consumers()
    server = await httpd.serve(handler, int(os.environ["BENCH_RAW_PORT"]))
    async with server, connection:
        await server.serve_forever()
