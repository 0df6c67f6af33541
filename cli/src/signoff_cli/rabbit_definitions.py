"""``deploy/rabbitmq/definitions.json``: the topology, per-service users and their permissions.

Built from ``signoff_runtime.topology`` (queues, exchanges, bindings, arguments) and
``interfaces`` (who consumes and publishes what), so the broker's definitions cannot drift from
the code. Services run with ``SIGNOFF_AMQP__DECLARE_TOPOLOGY=false`` against these definitions,
so a user needs ``configure`` only on the queues its subscribers (re)declare, ``write`` on the
exchanges it publishes to (and its own queues, which subscribers bind), and ``read`` on what it
consumes and on the exchanges its queues are bound from. The demo passwords are
``<service>-dev-password``: replace the users' hashes in any real deployment.

``amq.default`` routes to any queue by name, so only a service that answers requests over direct
reply-to may write to it (the proposals service). Asking needs no more than writing to the
request's exchange: the requester consumes its own channel's ``amq.rabbitmq.reply-to`` with no
permission at all (checked on RabbitMQ 3.10). Only consumers may write to the dead-letter exchange
(their failures); only the operators' ``cli`` user to ``replay`` (``signoff dlq replay``). What a
user may reach is still more than what its role may send (the dead-letter exchange routes to any
``.dlq``; ``commands`` carries proposal requests and approval commands alike): the consumers'
sender check (``signoff_runtime.senders``) closes that gap.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from signoff_runtime.topology import EXCHANGES, FORWARDS, QUEUES, REPLAYERS, ROLES, Role, Topology

from signoff_cli.interfaces import CONSUMES, DLQ_CONSUMER, PUBLISHES

VHOST = "/"
#: every broker user but the administrator: the services and the operators' command line
USERS: tuple[Role, ...] = ROLES


def password_hash(password: str, salt: bytes) -> str:
    """RabbitMQ's ``rabbit_password_hashing_sha256``: base64(salt + sha256(salt + password))."""
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


def _alternatives(names: list[str]) -> str:
    return "^(" + "|".join(re.escape(n) for n in sorted(set(names))) + ")$" if names else "^$"


def permissions(role: str, topo: Topology) -> dict[str, str]:
    consumed = CONSUMES.get(role, ())
    queues = [topo.name(c.queue) for c in consumed]
    bound_from = [topo.name(topo.spec(c.queue).exchange) for c in consumed]
    publishes = [topo.name(p.exchange) for p in PUBLISHES.get(role, ())]
    dlqs = [topo.dlq(spec.key) for spec in QUEUES] if role == DLQ_CONSUMER else []
    if dlqs:
        bound_from.append(topo.name("dlx"))  # the archive's subscribers bind each .dlq to it
    write = [*queues, *publishes]
    if consumed:
        write.append(topo.name("dlx"))  # a consumer dead-letters what it refuses
    if any(c.reply for c in consumed):
        write.append("amq.default")  # answers go to the requester's direct reply-to
    if role in REPLAYERS:
        # approval commands (the allow-list names the command line) and dead-letter replays
        write += [topo.name("commands"), topo.name("replay")]
    return {
        "user": role,
        "vhost": VHOST,
        "configure": _alternatives([*queues, *bound_from, *dlqs]),
        "write": _alternatives(write),
        "read": _alternatives([*queues, *bound_from, *dlqs]),
    }


def definitions(prefix: str = "signoff", delivery_limit: int = 5) -> dict[str, Any]:
    topo = Topology(prefix, delivery_limit)
    queues: list[dict[str, Any]] = []
    bindings: list[dict[str, Any]] = []
    for spec in QUEUES:
        queues.append(_queue(topo.name(spec.key), topo.queue_arguments(spec.key)))
        queues.append(_queue(topo.dlq(spec.key), {"x-queue-type": "quorum"}))
        for key in (spec.routing_key, *spec.extra_keys):
            bindings.append(_binding(topo.name(spec.exchange), topo.name(spec.key), key))
        bindings.append(_binding(topo.name("replay"), topo.name(spec.key), topo.name(spec.key)))
        bindings.append(_binding(topo.name("dlx"), topo.dlq(spec.key), topo.name(spec.key)))
    for source, destination, key in FORWARDS:
        bindings.append(_binding(topo.name(source), topo.name(destination), key, "exchange"))
    users = [
        {
            "name": name,
            "password_hash": password_hash(
                f"{name}-dev-password", name.encode()[:4].ljust(4, b"_")
            ),
            "hashing_algorithm": "rabbit_password_hashing_sha256",
            "tags": ["administrator"] if name == "admin" else [],
        }
        for name in ("admin", *USERS)
    ]
    admin = {"user": "admin", "vhost": VHOST, "configure": ".*", "write": ".*", "read": ".*"}
    return {
        "rabbit_version": "3.10.8",
        "vhosts": [{"name": VHOST}],
        "users": users,
        "permissions": [admin, *(permissions(s, topo) for s in USERS)],
        "exchanges": [
            {
                "name": topo.name(short),
                "vhost": VHOST,
                "type": kind,
                "durable": True,
                "auto_delete": False,
                "internal": False,
                "arguments": {},
            }
            for short, kind in EXCHANGES.items()
        ],
        "queues": queues,
        "bindings": bindings,
        "policies": [
            {
                # operators tune limits here without redeclaring queues (RabbitMQ recommends
                # policies over arguments); the queues' own arguments match it
                "vhost": VHOST,
                "name": f"{prefix}-work-queues",
                "pattern": f"^{re.escape(prefix)}\\.(?!.*\\.dlq$)",
                "apply-to": "queues",
                "priority": 0,
                "definition": {
                    "delivery-limit": delivery_limit,
                    "dead-letter-strategy": "at-least-once",
                    "overflow": "reject-publish",
                },
            }
        ],
    }


def _queue(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "vhost": VHOST,
        "durable": True,
        "auto_delete": False,
        "arguments": arguments,
    }


def _binding(source: str, destination: str, key: str, kind: str = "queue") -> dict[str, Any]:
    return {
        "source": source,
        "vhost": VHOST,
        "destination": destination,
        "destination_type": kind,
        "routing_key": key,
        "arguments": {},
    }
