"""``signoff status``: queue depths, proposal states, reconciliation backlog and outbox lag.

Queue depths come from passive declares (the management plugin may be off); everything else is
a handful of aggregate queries. Nothing here changes state.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import typer
from signoff_runtime import failover
from signoff_runtime.db import create_engine
from signoff_runtime.settings import ServiceSettings, load
from signoff_runtime.topology import QUEUES, Topology
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

OUTBOX_SCHEMAS = ("proposals", "executor", "reconciler")


async def queue_depths(amqp_url: str, topo: Topology) -> dict[str, tuple[int, int] | None]:
    """``name → (messages, consumers)``; ``None`` for a queue that does not exist."""
    out: dict[str, tuple[int, int] | None] = {}
    connection = await failover.connect(amqp_url)
    async with connection:
        for name in [n for s in QUEUES for n in (topo.name(s.key), topo.dlq(s.key))]:
            channel = await connection.channel()  # a failed passive declare closes its channel
            try:
                queue = await channel.declare_queue(name, passive=True)
                result = queue.declaration_result
                out[name] = (int(result.message_count or 0), int(result.consumer_count or 0))
                await channel.close()
            except aio_pika.exceptions.ChannelClosed:
                out[name] = None
    return out


async def database_summary(settings: ServiceSettings) -> dict[str, Any]:
    engine = create_engine(settings.db, application_name="signoff-status")
    summary: dict[str, Any] = {"states": {}, "outbox": {}, "reconciliation": None}
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT status, count(*) AS n FROM proposals.proposals GROUP BY status")
            )
            summary["states"] = {row.status: row.n for row in rows}
            for schema in OUTBOX_SCHEMAS:
                row = (
                    await conn.execute(
                        text(
                            "SELECT count(*) AS n, coalesce(extract(epoch FROM now() - "  # noqa: S608
                            f"min(created_at)), 0) AS age FROM {schema}.outbox "
                            "WHERE sent_at IS NULL"
                        )
                    )
                ).one()
                summary["outbox"][schema] = (row.n, float(row.age))
            row = (
                await conn.execute(
                    text(
                        "SELECT count(*) AS n, coalesce(extract(epoch FROM now() - "
                        "min(created_at)), 0) AS age FROM proposals.proposals "
                        "WHERE status = 'needs_reconciliation'"
                    )
                )
            ).one()
            summary["reconciliation"] = (row.n, float(row.age))
    except DBAPIError as exc:
        summary["error"] = type(exc.orig).__name__ if exc.orig else type(exc).__name__
    finally:
        await engine.dispose()
    return summary


def status() -> None:
    """Print queue depths, proposal states, reconciliation backlog and outbox lag."""
    settings = load(ServiceSettings, "status")
    topo = Topology(settings.amqp.prefix, settings.amqp.delivery_limit)
    depths = asyncio.run(queue_depths(settings.amqp.url, topo))
    summary = asyncio.run(database_summary(settings))
    typer.echo(f"{'queue':<44}{'messages':>10}{'consumers':>11}")
    for name, found in depths.items():
        cells = f"{found[0]:>10}{found[1]:>11}" if found else f"{'missing':>10}{'':>11}"
        typer.echo(f"{name:<44}{cells}")
    typer.echo("\nproposals by state")
    for state, count in sorted(summary["states"].items()):
        typer.echo(f"  {state:<24}{count:>8}")
    if summary["reconciliation"] is not None:
        count, age = summary["reconciliation"]
        typer.echo(f"\nreconciliation backlog  {count} (oldest proposal {age:.0f} s old)")
    typer.echo("\noutbox lag")
    for schema, (count, age) in summary["outbox"].items():
        typer.echo(f"  {schema:<24}{count:>8} unsent, oldest {age:.1f} s")
    if "error" in summary:
        typer.echo(f"\ndatabase: {summary['error']}", err=True)
        raise typer.Exit(1)
