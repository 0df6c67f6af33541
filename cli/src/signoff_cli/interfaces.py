"""Who consumes and publishes what: the one table behind the AsyncAPI documents and the
RabbitMQ permissions of ``deploy/rabbitmq/definitions.json``.

Subscribers take raw bodies (they parse them themselves, so a malformed message is dead-lettered
with a reason), so FastStream cannot describe their payloads; the documents are built here from
``signoff_contracts`` schemas and ``signoff_runtime.topology`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic.json_schema import models_json_schema
from signoff_contracts import v1, v2
from signoff_runtime.topology import EXCHANGES, Topology

#: each message type at its newest version (``v2`` replaced the agent's two request messages)
MESSAGES = {**v1.MESSAGES, **v2.MESSAGES}


@dataclass(frozen=True, slots=True)
class Consumed:
    queue: str  # topology queue key
    messages: tuple[str, ...]  # message types (``MESSAGES`` keys)
    reply: str | None = None  # request-reply: the reply's message type


@dataclass(frozen=True, slots=True)
class Published:
    exchange: str
    routing_key: str
    messages: tuple[str, ...]
    request_reply: bool = False


def _type(model_name: str) -> str:
    return next(t for t, m in MESSAGES.items() if m.__name__ == model_name)


def _types(*names: str) -> tuple[str, ...]:
    return tuple(_type(n) for n in names)


#: what a person's decision travels as, from any frontend to the proposals service
APPROVAL_COMMANDS = _types(
    "ApproveProposal", "DeclineProposal", "ReviseProposal", "ResolvePausePoint", "WithdrawProposal"
)

CONSUMES: dict[str, tuple[Consumed, ...]] = {
    "agent": (Consumed("agent.events", _types("ProposalEvent", "PausePointResolved")),),
    "proposals": (
        Consumed("proposals.requests", _types("ProposalRequested"), _type("ProposalRequestReply")),
        Consumed("proposals.approvals", APPROVAL_COMMANDS, _type("ApprovalReply")),
        Consumed(
            "proposals.pause-points",
            _types("PausePointRequested"),
            _type("PausePointRequestReply"),
        ),
        Consumed("proposals.outcomes", _types("OutcomeReported")),
        Consumed("proposals.reconciliation", _types("ReconciliationChecked")),
        Consumed("proposals.notifications", _types("ProposalEvent")),
    ),
    "executor": (Consumed("executor.contracts", _types("ExecutionContract")),),
    "reconciler": (Consumed("reconciler.required", _types("ReconciliationRequired")),),
    "web": (),  # the web frontend only asks: its replies come on the direct reply-to
}

PUBLISHES: dict[str, tuple[Published, ...]] = {
    "agent": (
        Published("commands", "proposal.requested", _types("ProposalRequested"), True),
        Published("commands", "pause_point.requested", _types("PausePointRequested"), True),
    ),
    "proposals": (
        Published("contracts", "execution.contract", _types("ExecutionContract")),
        Published("events", "proposal.#", _types("ProposalEvent")),
        Published("events", "pause_point.#", _types("PausePointResolved")),
        # a conversation's facts, which ``events`` also carries (``topology.FORWARDS``)
        Published("conversation-events", "proposal.#", _types("ProposalEvent")),
        Published("conversation-events", "pause_point.#", _types("PausePointResolved")),
    ),
    "executor": (
        Published("outcomes", "execution.outcome", _types("OutcomeReported")),
        Published(
            "outcomes", "execution.reconciliation_required", _types("ReconciliationRequired")
        ),
    ),
    "reconciler": (
        Published("outcomes", "execution.outcome", _types("OutcomeReported")),
        Published("outcomes", "execution.reconciliation_checked", _types("ReconciliationChecked")),
    ),
    "web": (Published("commands", "approval.command", APPROVAL_COMMANDS, True),),
}

#: the reconciler also archives every dead-letter queue and replays from it
DLQ_CONSUMER = "reconciler"


def asyncapi(service: str, prefix: str = "signoff") -> dict[str, Any]:
    """The AsyncAPI 3.0 document of one service's AMQP interface."""
    topo = Topology(prefix)
    used = sorted(
        {t for c in CONSUMES[service] for t in (*c.messages, *([c.reply] if c.reply else []))}
        | {t for p in PUBLISHES[service] for t in p.messages}
    )
    _, schemas = models_json_schema(
        [(MESSAGES[t], "serialization") for t in used],
        ref_template="#/components/schemas/{model}",
    )
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for c in CONSUMES[service]:
        spec = topo.spec(c.queue)
        cid = _channel_id(c.queue)
        channels[cid] = {
            "address": topo.name(c.queue),
            "messages": {t: {"$ref": f"#/components/messages/{t}"} for t in c.messages},
            "bindings": {
                "amqp": {
                    "is": "queue",
                    "queue": {"name": topo.name(c.queue), "durable": True, "exclusive": False},
                    "bindingVersion": "0.3.0",
                }
            },
            "description": f"{spec.purpose}; bound to {topo.name(spec.exchange)} "
            f"({', '.join((spec.routing_key, *spec.extra_keys))})",
        }
        op: dict[str, Any] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{cid}"},
            "messages": [{"$ref": f"#/channels/{cid}/messages/{t}"} for t in c.messages],
        }
        if c.reply:
            op["reply"] = {"messages": [{"$ref": f"#/components/messages/{c.reply}"}]}
        operations[f"receive_{cid}"] = op
    for p in PUBLISHES[service]:
        cid = _channel_id(f"{p.exchange}_{p.routing_key}")
        channels[cid] = {
            "address": p.routing_key,
            "messages": {t: {"$ref": f"#/components/messages/{t}"} for t in p.messages},
            "bindings": {
                "amqp": {
                    "is": "routingKey",
                    "exchange": {
                        "name": topo.name(p.exchange),
                        "type": EXCHANGES[p.exchange],
                        "durable": True,
                    },
                    "bindingVersion": "0.3.0",
                }
            },
        }
        operations[f"send_{cid}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{cid}"},
            "messages": [{"$ref": f"#/channels/{cid}/messages/{t}"} for t in p.messages],
            "description": "request-reply (direct reply-to, with a timeout)"
            if p.request_reply
            else "through the service's outbox (persistent, confirmed)",
        }
    return {
        "asyncapi": "3.0.0",
        "info": {"title": f"signoff {service}", "version": "1"},
        "defaultContentType": "application/json",
        "servers": {"rabbitmq": {"host": "rabbitmq:5672", "protocol": "amqp"}},
        "channels": channels,
        "operations": operations,
        "components": {
            "messages": {
                t: {"name": t, "title": MESSAGES[t].__name__, "payload": {"$ref": _ref(t)}}
                for t in used
            },
            "schemas": schemas.get("$defs", {}),
        },
    }


def _channel_id(name: str) -> str:
    """An AsyncAPI channel key for a queue or an exchange's routing key (``#``: ``all``)."""
    return name.replace(".", "_").replace("-", "_").replace("#", "all")


def _ref(message_type: str) -> str:
    return f"#/components/schemas/{MESSAGES[message_type].__name__}"
