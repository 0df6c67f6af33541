"""The raw program's tables (schema ``bench_raw`` in the benchmark's database) and queues.

The plan — how many events and extra commits each proposal makes, and how big its messages
are — is given to the front process before each batch (``POST /_plan``), which hands every
claimed proposal its share (``spread``), so the raw program matches signoff's measured
per-proposal figures on average without restarting and without a database write.
"""

from __future__ import annotations

from collections.abc import Sequence

import aio_pika
import asyncpg

SCHEMA = "bench_raw"
QUEUES = ("contracts", "outcomes", "events")
DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.forms (
    id text PRIMARY KEY, subject text NOT NULL DEFAULT '', body text NOT NULL DEFAULT '',
    revision int NOT NULL DEFAULT 0, applied_proposal_id text,
    updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS {SCHEMA}.proposals (
    id text PRIMARY KEY, form_id text NOT NULL, status text NOT NULL,
    touched int NOT NULL DEFAULT 0, decided_at timestamptz, outcome_at timestamptz);
CREATE TABLE IF NOT EXISTS {SCHEMA}.inbox (
    message_id text PRIMARY KEY, received_at timestamptz NOT NULL DEFAULT now());
"""


def queue_name(prefix: str, short: str) -> str:
    return f"{prefix}.{short}"


async def declare(amqp_url: str, prefix: str, *, delete: bool = False) -> None:
    """Quorum queues, durable, with a delivery limit: what signoff's work queues are."""
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        for short in QUEUES:
            if delete:
                await channel.queue_delete(queue_name(prefix, short))
            else:
                await channel.declare_queue(
                    queue_name(prefix, short),
                    durable=True,
                    arguments={"x-queue-type": "quorum", "x-delivery-limit": 3},
                )


def share(total: float, index: int) -> int:
    """The ``index``-th of integers that add up, over any first n, to ``round(total * n)``: a
    fractional per-proposal figure (9.4 commits) is matched on average by 9s and 10s."""
    return int((index + 1) * total + 0.5) - int(index * total + 0.5)


async def add_proposals(conn: asyncpg.Connection, ids: Sequence[str]) -> None:
    await conn.copy_records_to_table(
        "forms", schema_name=SCHEMA, columns=["id"], records=[(f"f{pid}",) for pid in ids]
    )
    await conn.copy_records_to_table(
        "proposals",
        schema_name=SCHEMA,
        columns=["id", "form_id", "status"],
        records=[(pid, f"f{pid}", "pending") for pid in ids],
    )
