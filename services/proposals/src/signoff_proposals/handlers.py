"""The service's AMQP consumers: proposal requests, approval commands, pause points, outcomes.

Each subscriber acks manually through ``settle`` (after its transaction committed) and parses
the body itself, so a malformed message is answered or dead-lettered with a reason instead of
being dropped by FastStream's default policy. Request-reply answers are published here, after the
commit and before the ack (``no_reply=True`` turns FastStream's own reply off): a delivery that
is retried sends no empty reply, and a replay is answered from what was stored. A request that
does not parse gets a typed ``invalid`` reply if it left a reply address, else the dead-letter
queue; one whose handling fails for good gets a typed rejection before it is dead-lettered
(``rejections``). Reconciliation checks are stored for the status page (``reconciliation``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream import AckPolicy
from faststream.rabbit import Channel, RabbitBroker
from faststream.rabbit.message import RabbitMessage as Message
from pydantic import ValidationError
from signoff_contracts.v1 import (
    Envelope,
    OutcomeReported,
    PausePointRequested,
    ProposalRequested,
    ReconciliationChecked,
    approval_command_adapter,
)
from signoff_runtime.consumer import Delivery, raw_body, settle
from signoff_runtime.senders import Senders, broker_user

from signoff_proposals import (
    commands,
    decide,
    domain,
    intake,
    outcomes,
    pause_points,
    reconciliation,
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


async def _intake(ctx: Context, broker: RabbitBroker, msg: Message) -> None:
    try:
        request = ProposalRequested.model_validate_json(msg.body)
    except ValidationError:
        if not msg.reply_to:
            raise
        await _reply(ctx, broker, msg, intake.invalid_request(msg.raw_message.correlation_id))
        return
    await _reply(ctx, broker, msg, await intake.store(ctx, request))


async def _pause_point(ctx: Context, broker: RabbitBroker, msg: Message) -> None:
    try:
        request = PausePointRequested.model_validate_json(msg.body)
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
