"""What the insider suite's modules share: acting as one role's broker user, and waiting for a
message to be refused (dead-lettered and archived by the reconciler)."""

from __future__ import annotations

import json
from typing import Any

import aio_pika
import e2e_broker_users
from e2e_stack import Stack
from faststream.rabbit import RabbitBroker
from signoff_contracts.ids import new_id
from signoff_contracts.v1.envelope import Envelope
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import ServiceProcess
from signoff_runtime.topology import ROUTING_KEYS, Role

REFUND = "order.refund_missing_discount"


async def publish(
    stack: Stack,
    role: Role,
    exchange: str,
    routing_key: str,
    body: bytes,
    *,
    user_id: str | None = "own",
    returns: bool = False,
    **props: Any,
) -> None:
    """Publish as ``role``'s user; ``user_id="own"`` names it, ``None`` leaves it out."""
    connection = await aio_pika.connect(stack.role_url(role))
    async with connection:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=returns)
        target = (
            channel.default_exchange
            if exchange == "amq.default"
            else await channel.get_exchange(stack.topology.name(exchange), ensure=False)
        )
        named = e2e_broker_users.user(role) if user_id == "own" else user_id
        await target.publish(
            aio_pika.Message(
                body,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                content_type="application/json",
                user_id=named,
                **props,
            ),
            routing_key=routing_key,
        )


async def refused_as(stack: Stack, queue: str, message_id: str) -> dict[str, Any]:
    """Wait for the reconciler to archive ``message_id``'s dead letter from ``queue``."""

    async def probe() -> dict[str, Any] | None:
        found = [d for d in await stack.dead_letters(queue) if d["message_id"] == message_id]
        return found[0] if found else None

    return await wait_until(probe, timeout=60.0, what=f"{message_id} dead-lettered from {queue}")


async def propose_refund(stack: Stack, org: dict[str, Any], token: str) -> str:
    case = org["refund_case"]
    request = {
        "payment_id": case["payment_id"],
        "line_item_id": case["line_item_id"],
        "discount_id": case["discount_id"],
        "destination": "original_payment_method",
    }
    response = await stack.propose(token, REFUND, case["order_id"], request)
    assert response.status_code == 201, response.text
    return str(response.json()["proposal"]["id"])


def restart(stack: Stack, name: str, drop: tuple[str, ...] = (), /, **env: str) -> None:
    """Restart process ``name`` with ``env`` on top of how it runs, less ``drop`` and any
    negative-control switch an earlier restart turned on (so a plain restart restores it)."""
    old = stack.processes[name]
    old.stop()
    kept = {
        k: v for k, v in old.env.items() if k not in drop and not k.startswith("SIGNOFF_UNSAFE__")
    }
    fresh = ServiceProcess(old.name, old.argv, {**kept, **env}, old.port, old.log_dir).start()
    stack.processes[name] = fresh
    fresh.wait_healthy(60.0)


async def command(
    stack: Stack, role: Role, message: Envelope, queue: str = "proposals.approvals"
) -> dict[str, Any]:
    """``message`` as a request-reply command from ``role``'s user to ``queue``; the answer."""
    async with RabbitBroker(stack.role_url(role)) as broker:
        answer = await broker.request(
            message.model_dump_json().encode(),
            exchange=stack.topology.name("commands"),
            routing_key=ROUTING_KEYS[queue],
            message_id=message.message_id,
            correlation_id=new_id("cmd"),
            user_id=e2e_broker_users.user(role),
            content_type="application/json",
            persist=True,
            timeout=15.0,
        )
    return dict(json.loads(bytes(answer.body)))
