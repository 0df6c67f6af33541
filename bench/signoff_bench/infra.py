"""The benchmark's own database and queue prefix, and the counters read around each window.

Commits come from ``pg_stat_database.xact_commit`` of the benchmark's database, read from a
connection to the server's maintenance database so reading them adds no commit. PostgreSQL 15
flushes a backend's counters at most once a second, and a backend that went idle within that
second flushes only after ``PGSTAT_IDLE_INTERVAL`` (10 s): so every window closes only after the
system has gone quiet and ``FLUSH_S`` more has passed. The harness's own reads of the
benchmark's database (``Probe``) are rolled back, so they add no commit either. The broker's
management plugin is off: its global counters are read with ``rabbitmqctl eval`` — node-wide,
so other clients' traffic at the same time shows up there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aio_pika
import asyncpg
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.migrations import upgrade_all
from sqlalchemy.engine import make_url

#: longer than PostgreSQL 15's PGSTAT_IDLE_INTERVAL (10 s), so idle backends have flushed
FLUSH_S = 11.0

_BROKER_EVAL = (
    "O = rabbit_global_counters:overview(), "
    "P = maps:get([{protocol,amqp091}], O), "
    "Q = maps:get([{protocol,amqp091},{queue_type,rabbit_quorum_queue}], O), "
    "[maps:get(K, P) || K <- [messages_received_confirm_total, messages_confirmed_total, "
    "messages_routed_total]] ++ "
    "[maps:get(K, Q) || K <- [messages_delivered_total, messages_acknowledged_total]]."
)
BROKER_COUNTERS = ("received_confirm", "confirmed", "routed", "delivered", "acknowledged")


@dataclass(frozen=True, slots=True)
class Database:
    server_url: str
    name: str

    @property
    def url(self) -> str:
        return make_url(self.server_url).set(database=self.name).render_as_string(False)

    @property
    def dsn(self) -> str:
        return asyncpg_dsn(self.url)


async def create_database(server_url: str) -> Database:
    """A fresh database with every owner's schema migrated (as the test fixtures make one)."""
    db = Database(server_url, f"signoff_bench_{secrets.token_hex(4)}")
    admin = await asyncpg.connect(asyncpg_dsn(server_url))
    try:
        await admin.execute(f'CREATE DATABASE "{db.name}"')
    finally:
        await admin.close()
    await asyncio.to_thread(upgrade_all, db.url)
    return db


async def drop_database(db: Database) -> None:
    admin = await asyncpg.connect(asyncpg_dsn(db.server_url))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
    finally:
        await admin.close()


class Probe:
    """The harness's reads of the benchmark database: each in a read-only transaction that it
    rolls back, so none of them adds to ``xact_commit``."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, db: Database) -> Probe:
        return cls(await asyncpg.connect(db.dsn))

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        transaction = self.conn.transaction(readonly=True)
        await transaction.start()
        try:
            return list(await self.conn.fetch(sql, *args))
        finally:
            await transaction.rollback()

    async def fetchval(self, sql: str, *args: Any) -> Any:
        rows = await self.fetch(sql, *args)
        return rows[0][0] if rows else None

    async def close(self) -> None:
        await self.conn.close()


class Counters:
    """Commits of the benchmark database, from a connection that is not to it."""

    def __init__(self, admin: asyncpg.Connection, database: str) -> None:
        self._admin = admin
        self._database = database

    @classmethod
    async def open(cls, db: Database) -> Counters:
        return cls(await asyncpg.connect(asyncpg_dsn(db.server_url)), db.name)

    async def commits(self) -> int:
        value = await self._admin.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", self._database
        )
        return int(value)

    async def backend_pids(self) -> list[int]:
        rows = await self._admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = "
            "'client backend' AND pid <> pg_backend_pid()",
            self._database,
        )
        return [int(r["pid"]) for r in rows]

    async def server_version(self) -> str:
        return str(await self._admin.fetchval("SHOW server_version"))

    async def close(self) -> None:
        await self._admin.close()


async def broker_counters() -> dict[str, int] | None:
    """The node's global message counters, or None where ``rabbitmqctl`` cannot answer."""
    if shutil.which("rabbitmqctl") is None:
        return None
    proc = await asyncio.create_subprocess_exec(
        "rabbitmqctl",
        "eval",
        _BROKER_EVAL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await proc.communicate()
    numbers = [int(n) for n in re.findall(rb"\d+", out)]
    if proc.returncode != 0 or len(numbers) != len(BROKER_COUNTERS):
        return None
    return dict(zip(BROKER_COUNTERS, numbers, strict=True))


async def broker_version() -> str:
    if shutil.which("rabbitmqctl") is None:
        return "unknown"
    proc = await asyncio.create_subprocess_exec(
        "rabbitmqctl",
        "eval",
        "rabbit_misc:version().",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await proc.communicate()
    return out.decode().strip().strip('"') or "unknown"


async def ready_messages(amqp_url: str, queues: Iterable[str]) -> int:
    """Messages waiting in ``queues`` (passive declares: the management API is off)."""
    connection = await aio_pika.connect(amqp_url)
    total = 0
    async with connection:
        for name in queues:
            channel = await connection.channel()
            with contextlib.suppress(aio_pika.exceptions.ChannelClosed):
                declared = await channel.declare_queue(name, passive=True)
                total += int(declared.declaration_result.message_count or 0)
    return total
