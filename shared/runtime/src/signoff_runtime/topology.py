"""The RabbitMQ topology: every exchange, queue and binding signoff uses, in one place.

All names carry a prefix (``SIGNOFF_AMQP__PREFIX``) so tests and benchmarks never share queues
with a running system. Every work queue is a quorum queue with an explicit delivery limit
(RabbitMQ 3.10 has no default) and at-least-once dead-lettering into its own ``.dlq``; that needs
``overflow: reject-publish``, so a full queue refuses publishes (confirm nack) instead of dropping
messages. ``docs/topology.md`` documents this table for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import aio_pika
from faststream.rabbit import ExchangeType, QueueType, RabbitExchange, RabbitQueue

ExchangeKind = Literal["direct", "topic"]
#: the broker users' roles; ``SIGNOFF_AMQP__USERS`` maps each to its user name(s)
Role = Literal["agent", "proposals", "executor", "reconciler", "web", "cli"]
ROLES: tuple[Role, ...] = ("agent", "proposals", "executor", "reconciler", "web", "cli")
#: who may replay an archived dead letter, vouching for its original sender (``x-signoff-sender``)
REPLAYERS: tuple[Role, ...] = ("cli",)


@dataclass(frozen=True, slots=True)
class QueueSpec:
    key: str  # short name, e.g. "executor.contracts"
    exchange: str  # short exchange name
    routing_key: str
    purpose: str
    consumer: Role
    senders: tuple[Role, ...]  # whose broker users may send to this queue
    extra_keys: tuple[str, ...] = ()  # further bindings on the same exchange


EXCHANGES: dict[str, ExchangeKind] = {
    "commands": "direct",  # request-reply commands to the proposals service
    "contracts": "direct",  # signed execution contracts
    "outcomes": "direct",  # outcomes and reconciliation requests
    "events": "topic",  # proposal and pause-point facts, fanned out by topic
    # the facts about a conversation's proposals and pause points: the agent's, forwarded whole
    # to ``events`` (``FORWARDS``), so every reader of ``events`` still sees every fact
    "conversation-events": "topic",
    "dlx": "direct",  # dead letters, routed by the original queue's name
    "replay": "direct",  # replayed dead letters, routed by the original queue's name
}

#: the exchanges of facts: a fact no queue is bound to has no reader yet, which is no fault, so
#: the relay publishes to these without ``mandatory`` (every other publish is, and a routing key
#: bound nowhere leaves its row in the outbox)
FACT_EXCHANGES: frozenset[str] = frozenset({"events", "conversation-events"})

#: exchange-to-exchange bindings: (source, destination, routing key)
FORWARDS: tuple[tuple[str, str, str], ...] = (("conversation-events", "events", "#"),)

QUEUES: tuple[QueueSpec, ...] = (
    QueueSpec(
        "proposals.requests",
        "commands",
        "proposal.requested",
        "resolve and store proposals",
        consumer="proposals",
        senders=("agent",),
    ),
    QueueSpec(
        "proposals.approvals",
        "commands",
        "approval.command",
        "approve/decline/revise",
        consumer="proposals",
        senders=("web", "cli"),
    ),
    QueueSpec(
        "proposals.pause-points",
        "commands",
        "pause_point.requested",
        "store pause points",
        consumer="proposals",
        senders=("agent",),
    ),
    QueueSpec(
        "proposals.outcomes",
        "outcomes",
        "execution.outcome",
        "record outcomes",
        consumer="proposals",
        # the reconciler also carries operators' verdicts (``signoff reconcile --resolve``)
        senders=("executor", "reconciler"),
    ),
    QueueSpec(
        "proposals.reconciliation",
        "outcomes",
        "execution.reconciliation_checked",
        "record each reconciliation check for the status page",
        consumer="proposals",
        senders=("reconciler",),
    ),
    QueueSpec(
        "proposals.notifications",
        "events",
        # e-mail notices; the kinds webhooks subscribe to are bound while one wants them
        # (``signoff_proposals.notifications.bindings``)
        "proposal.created",
        "turn proposal events into webhook and e-mail deliveries"
        " (and proposal.<kind> while a webhook wants it)",
        consumer="proposals",
        senders=("proposals",),
    ),
    QueueSpec(
        "executor.contracts",
        "contracts",
        "execution.contract",
        "run contracts",
        consumer="executor",
        senders=("proposals",),
    ),
    QueueSpec(
        "reconciler.required",
        "outcomes",
        "execution.reconciliation_required",
        "reconcile",
        consumer="reconciler",
        senders=("executor",),
    ),
    QueueSpec(
        "agent.events",
        "conversation-events",
        "proposal.#",
        "hand outcomes and pause-point resolutions back to conversations",
        consumer="agent",
        senders=("proposals",),
        extra_keys=("pause_point.#",),
    ),
)

ROUTING_KEYS = {spec.key: spec.routing_key for spec in QUEUES}

#: bindings of earlier versions that ``declare`` removes: (queue key, exchange, routing key). The
#: agent's queue used to take every event from ``events``, the facts about proposals with no
#: conversation (all of the machine-facing endpoint's) included, and dropped those unread.
RETIRED_BINDINGS: tuple[tuple[str, str, str], ...] = (
    ("agent.events", "events", "proposal.#"),
    ("agent.events", "events", "pause_point.#"),
)


def events_exchange(conversation_id: str | None) -> str:
    """The exchange (short name) a fact about a proposal or pause point is published to: the
    conversation's exchange if it has one (the agent hands it back), else ``events``."""
    return "conversation-events" if conversation_id is not None else "events"


@dataclass(frozen=True, slots=True)
class Topology:
    prefix: str
    delivery_limit: int = 5

    def name(self, short: str) -> str:
        return f"{self.prefix}.{short}"

    def spec(self, key: str) -> QueueSpec:
        return next(spec for spec in QUEUES if spec.key == key)

    def queue_arguments(self, key: str) -> dict[str, Any]:
        return {
            "x-queue-type": "quorum",
            "x-delivery-limit": self.delivery_limit,
            "x-dead-letter-exchange": self.name("dlx"),
            "x-dead-letter-routing-key": self.name(key),
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        }

    def exchange(self, short: str) -> RabbitExchange:
        kind = ExchangeType.TOPIC if EXCHANGES[short] == "topic" else ExchangeType.DIRECT
        return RabbitExchange(self.name(short), type=kind, durable=True)

    def queue(self, key: str) -> RabbitQueue:
        """The FastStream declaration of work queue ``key`` (same arguments as ``declare``)."""
        spec = self.spec(key)
        arguments: Any = self.queue_arguments(key)  # x-dead-letter-strategy is not in the TypedDict
        queue: RabbitQueue = RabbitQueue(
            self.name(key),
            queue_type=QueueType.QUORUM,
            durable=True,
            arguments=arguments,
            routing_key=spec.routing_key,
        )
        return queue

    def dlq(self, key: str) -> str:
        return self.name(f"{key}.dlq")

    async def declare(self, channel: aio_pika.abc.AbstractChannel) -> None:
        """Declare everything idempotently (every service does this at start-up)."""
        exchanges = {}
        for short, kind in EXCHANGES.items():
            exchanges[short] = await channel.declare_exchange(
                self.name(short), type=aio_pika.ExchangeType(kind), durable=True
            )
        for source, destination, key in FORWARDS:
            await exchanges[destination].bind(exchanges[source], routing_key=key)
        queues = {}
        for spec in QUEUES:
            queues[spec.key] = queue = await channel.declare_queue(
                self.name(spec.key), durable=True, arguments=self.queue_arguments(spec.key)
            )
            for key in (spec.routing_key, *spec.extra_keys):
                await queue.bind(exchanges[spec.exchange], routing_key=key)
            await queue.bind(exchanges["replay"], routing_key=self.name(spec.key))
            dlq = await channel.declare_queue(
                self.dlq(spec.key), durable=True, arguments={"x-queue-type": "quorum"}
            )
            await dlq.bind(exchanges["dlx"], routing_key=self.name(spec.key))
        for key, exchange, routing_key in RETIRED_BINDINGS:  # unbind-ok where they are gone
            await queues[key].unbind(exchanges[exchange], routing_key=routing_key)

    async def delete(self, channel: aio_pika.abc.AbstractChannel) -> None:
        """Remove every queue and exchange of this prefix (tests clean up after themselves)."""
        for spec in QUEUES:
            await channel.queue_delete(self.name(spec.key))
            await channel.queue_delete(self.dlq(spec.key))
        for short in EXCHANGES:
            await channel.exchange_delete(self.name(short))
