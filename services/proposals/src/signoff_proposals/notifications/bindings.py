"""Which events reach the notifier: its queue's bindings follow the webhooks' subscriptions.

The queue ``proposals.notifications`` is bound to ``proposal.created`` always (e-mail notices go
out on it, and the topology declares it) and to ``proposal.<kind>`` for any other kind only
while some webhook subscribes to it. Most events have nobody to tell: each one the notifier
heard cost a quorum-queue message, a delivery, an ack and a read of the subscriptions to find
that out (issue 18). With no webhook, it now hears one event per proposal, not every one.

A subscription hears every event published after its creation answered: the creation binds its
kinds inside its transaction, before its row commits. Kinds nobody wants any more are unbound
by ``settle`` (at the service's start, and after a subscription is deleted), never while a
creation is under way: a creation holds the advisory lock ``LOCK`` shared from its binds to its
commit, and ``settle`` holds it exclusively while it reads what is wanted and unbinds the rest.
Binding twice is harmless and unbinding what is not bound is unbind-ok, so replicas need no
more than that lock.

``settle`` also removes ``proposal.#``, the binding of earlier versions (every event), and only
after the wanted kinds are bound: an upgrade misses no event a webhook wants. A broker set up
from ``definitions.json`` loses it the same way (the proposals user may bind its own queues).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import get_args

import aiormq
import structlog
from aio_pika.exceptions import CONNECTION_EXCEPTIONS
from signoff_runtime import failover
from signoff_runtime.topology import ROUTING_KEYS
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.context import Context
from signoff_proposals.lifecycle.domain import EventName, routing_key
from signoff_proposals.notifications.tables import subscriptions

log = structlog.get_logger(__name__)
QUEUE = "proposals.notifications"
#: the kinds that travel as proposal events (a webhook's ``escalated`` comes another way)
KINDS: tuple[EventName, ...] = get_args(EventName)
#: bound whatever the subscriptions (the topology declares it): e-mail notices are sent on it
ALWAYS = ROUTING_KEYS[QUEUE]
#: what earlier versions bound the queue to
EVERYTHING = "proposal.#"
#: what a change of the bindings may meet from the broker: it answers later (the caller says so)
BROKER_FAILURES = (*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError, asyncio.TimeoutError)
#: how long a start whose ``settle`` failed waits before it tries again
RETRY_S = 5.0
#: the advisory-lock namespace (``intake.quotas`` holds the others)
LOCK = 0x5350_0003


async def bind(ctx: Context, conn: AsyncConnection, kinds: Iterable[str]) -> None:
    """In a subscription's transaction, before it commits: the queue bound to its ``kinds``."""
    await conn.execute(text("SELECT pg_advisory_xact_lock_shared(:ns, 0)"), {"ns": LOCK})
    await _rebind(ctx, bound=_keys(set(kinds)))


async def settle(ctx: Context) -> None:
    """The queue bound to the kinds some subscription wants, and to nothing else."""
    async with ctx.engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(:ns, 0)"), {"ns": LOCK})
        found = await conn.execute(
            select(func.jsonb_array_elements_text(subscriptions.c.events)).distinct()
        )
        # ``ALWAYS`` too: a broker loaded from an earlier ``definitions.json`` lacks it
        wanted = [ALWAYS, *(key for key in _keys({kind for (kind,) in found}) if key != ALWAYS)]
        unwanted = [key for key in _keys(set(KINDS)) if key not in wanted]
        await _rebind(ctx, bound=wanted, unbound=[*unwanted, EVERYTHING])


async def settled(ctx: Context) -> bool:
    """``settle``, and whether it could: a failure (the broker or the database out of reach)
    is logged and leaves the bindings as they were, a superset of what is wanted."""
    try:
        await settle(ctx)
    except Exception as exc:
        log.warning("notify.bindings_unsettled", error=repr(exc), retry_s=RETRY_S)
        return False
    return True


async def settled_or_retrying(ctx: Context) -> asyncio.Task[None] | None:
    """``settle`` at the service's start; if it cannot, a task that tries again every
    ``RETRY_S`` until it can (the caller cancels it at stop)."""
    return None if await settled(ctx) else asyncio.create_task(_until_settled(ctx))


async def _until_settled(ctx: Context) -> None:
    while True:
        await asyncio.sleep(RETRY_S)
        if await settled(ctx):
            return


def _keys(kinds: set[str]) -> list[str]:
    """The routing keys of those of ``kinds`` that travel as proposal events."""
    return [routing_key(kind) for kind in KINDS if kind in kinds]


async def _rebind(ctx: Context, *, bound: list[str], unbound: Iterable[str] = ()) -> None:
    """Bind, then unbind, on a connection of its own (rare: a subscription's change, a start)."""
    topo = ctx.topology
    connection = await failover.connect(
        ctx.settings.amqp.url, timeout=ctx.settings.amqp.publish_timeout_s
    )
    async with connection:
        channel = await connection.channel()
        queue = await channel.get_queue(topo.name(QUEUE), ensure=False)
        exchange = topo.name(topo.spec(QUEUE).exchange)
        for key in bound:
            await queue.bind(exchange, routing_key=key)
        for key in unbound:
            await queue.unbind(exchange, routing_key=key)
