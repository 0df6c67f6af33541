"""The service's AMQP consumers: proposal requests, approval commands, pause points, outcomes.

Each subscriber acks manually through ``settle`` (after its transaction committed) and parses
the body itself, so a malformed message is answered or dead-lettered with a reason instead of
being dropped by FastStream's default policy. Request-reply answers are published here, after the
commit and before the ack (``no_reply=True`` turns FastStream's own reply off): a delivery that
is retried sends no empty reply, and a replay is answered from what was stored. A request that
does not parse gets a typed ``invalid`` reply if it left a reply address, else the dead-letter
queue; one whose handling fails for good gets a typed rejection before it is dead-lettered
(``rejections``). Reconciliation checks are stored for the status page (``reconciliation``).

The agent's two requests are version 2 (``signoff_contracts.v2``): a v1 request carried
arguments, a preview or a person of the agent's own making and is refused — a typed reply with
reason ``unsupported_version`` and a dead letter saying so — except under the negative control
``SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT`` (``trusted_intake``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from faststream import AckPolicy
from faststream.rabbit import Channel, RabbitBroker
from faststream.rabbit.message import RabbitMessage as Message
from pydantic import ValidationError
from signoff_contracts import v1, v2
from signoff_contracts.v1 import (
    Envelope,
    OutcomeReported,
    ReconciliationChecked,
    approval_command_adapter,
)
from signoff_runtime.consumer import Delivery, PermanentError, raw_body, settle
from signoff_runtime.senders import Senders, broker_user

from signoff_proposals import (
    commands,
    decide,
    domain,
    intake,
    outcomes,
    pause_points,
    reconciliation,
    trusted_intake,
)
from signoff_proposals.context import Context
from signoff_proposals.metrics import APPROVAL_COMMANDS
from signoff_proposals.rejections import rejecting

Handler = Callable[[Message], Awaitable[None]]


def register(ctx: Context, broker: RabbitBroker) -> None:
    topo = ctx.topology
    senders = Senders.from_settings(ctx.settings)

    def subscriber(key: str) -> Callable[[Handler], object]:
        return broker.subscriber(
            topo.queue(key),
            exchange=topo.exchange(topo.spec(key).exchange),
            ack_policy=AckPolicy.MANUAL,
            channel=Channel(prefetch_count=ctx.settings.amqp.prefetch),
            no_reply=True,
            decoder=raw_body,
        )

    def consume(key: str, work: Callable[[Message], Callable[[], Awaitable[None]]]) -> None:
        async def handler(msg: Delivery) -> None:
            await settle(
                msg, broker=broker, topology=topo, queue_key=key, senders=senders, work=work(msg)
            )

        handler.__name__ = handler.__qualname__ = f"on_{key.replace('.', '_').replace('-', '_')}"
        subscriber(key)(handler)

    # request-reply queues: a final failure still gets a typed rejection
    answered = {
        "proposals.requests": _intake,
        "proposals.approvals": _command,
        "proposals.pause-points": _pause_point,
    }
    for key, handle in answered.items():
        consume(key, _answering(ctx, broker, key, handle))
    consume("proposals.outcomes", lambda msg: lambda: _outcome(ctx, msg))
    consume("proposals.reconciliation", lambda msg: lambda: _reconciliation_checked(ctx, msg))


def _answering(
    ctx: Context,
    broker: RabbitBroker,
    key: str,
    handle: Callable[[Context, RabbitBroker, Message], Awaitable[None]],
) -> Callable[[Message], Callable[[], Awaitable[None]]]:
    return lambda msg: _answered(ctx, broker, msg, key, handle)


def _answered(
    ctx: Context,
    broker: RabbitBroker,
    msg: Message,
    key: str,
    handle: Callable[[Context, RabbitBroker, Message], Awaitable[None]],
) -> Callable[[], Awaitable[None]]:
    """``handle`` for a request-reply queue: a final failure still gets a typed rejection."""

    async def reply(answer: Envelope) -> None:
        await _reply(ctx, broker, msg, answer)

    return lambda: rejecting(msg, ctx.topology, key, lambda: handle(ctx, broker, msg), reply)


def _version(body: bytes) -> object:
    """The envelope's ``version`` (1 when absent: the v1 default), or ``None`` if unreadable."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document.get("version", 1) if isinstance(document, dict) else None


def _refuse_v1(body: bytes) -> None:
    if _version(body) == 1:
        raise PermanentError(
            "unsupported_version",
            "a v1 request carries what the agent made; the proposals service takes v2 only",
        )


async def _intake(ctx: Context, broker: RabbitBroker, msg: Message) -> None:
    if ctx.settings.unsafe.trust_agent_contract and _version(msg.body) == 1:
        trusted = v1.ProposalRequested.model_validate_json(msg.body)
        await _reply(ctx, broker, msg, await trusted_intake.store(ctx, trusted))
        return
    _refuse_v1(msg.body)
    try:
        request = v2.ProposalRequested.model_validate_json(msg.body)
    except ValidationError:
        if not msg.reply_to:
            raise
        await _reply(ctx, broker, msg, intake.invalid_request(msg.raw_message.correlation_id))
        return
    await _reply(ctx, broker, msg, await intake.store(ctx, request))


async def _pause_point(ctx: Context, broker: RabbitBroker, msg: Message) -> None:
    _refuse_v1(msg.body)
    try:
        request = v2.PausePointRequested.model_validate_json(msg.body)
    except ValidationError as exc:
        if not msg.reply_to:
            raise
        await _reply(ctx, broker, msg, pause_points.invalid_request(msg.body, exc))
        return
    await _reply(ctx, broker, msg, await pause_points.store(ctx, request))


async def _command(ctx: Context, broker: RabbitBroker, msg: Message) -> None:
    try:
        command = approval_command_adapter.validate_json(msg.body)
    except ValidationError:
        if not msg.reply_to:
            raise
        APPROVAL_COMMANDS.labels(channel="amqp", command="invalid", result="invalid").inc()
        await _reply(ctx, broker, msg, decide.reply(domain.INVALID_MESSAGE))
        return
    reply = await commands.answer(ctx, command)
    APPROVAL_COMMANDS.labels(
        channel="amqp", command=commands.COMMAND_NAMES[command.type], result=reply.result
    ).inc()
    await _reply(ctx, broker, msg, reply)


async def _outcome(ctx: Context, msg: Message) -> None:
    await outcomes.record(ctx, OutcomeReported.model_validate_json(msg.body))


async def _reconciliation_checked(ctx: Context, msg: Message) -> None:
    await reconciliation.record(ctx, ReconciliationChecked.model_validate_json(msg.body))


async def _reply(ctx: Context, broker: RabbitBroker, msg: Message, reply: Envelope) -> None:
    if not msg.reply_to:
        return
    await broker.publish(
        reply.model_dump_json().encode(),
        routing_key=msg.reply_to,
        correlation_id=msg.raw_message.correlation_id,
        message_id=reply.message_id,
        message_type=reply.type,
        content_type="application/json",
        user_id=broker_user(ctx.settings.amqp.url),
        timeout=ctx.settings.amqp.publish_timeout_s,
    )
