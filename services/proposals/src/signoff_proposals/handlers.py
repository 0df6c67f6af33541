"""The service's AMQP consumers: proposal requests, approval commands, pause points, outcomes.

Wiring only: each queue's work is its feature's ``handlers`` module (``intake``, ``decisions``,
``pause_points``, ``outcomes``); a request-reply handler returns its typed reply and this module
publishes it (``signoff_runtime.rpc.answer``).

Outcomes, the busiest queue, are recorded a batch at a time (``signoff_runtime.batching``: the
reports waiting together in one transaction, at most ``SIGNOFF_AMQP__BATCH_SIZE``). Approval
commands can be decided a batch at a time too (``SIGNOFF_PROPOSALS__APPROVAL_BATCH_SIZE`` above
1; off by default, being slower here), each in its own savepoint of the batch's transaction
(``signoff_runtime.savepoints``), their replies published once it has committed; a command that
fails in a batch is settled by itself, as it would be without batches.

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
``SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT`` (``intake.trusted``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream.rabbit import RabbitBroker
from faststream.rabbit.message import RabbitMessage as Message
from signoff_contracts.v1 import Envelope
from signoff_runtime import batching, consumer, rpc, savepoints
from signoff_runtime.senders import Senders, broker_user
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.context import Context
from signoff_proposals.decisions import handlers as decision_handlers
from signoff_proposals.intake import handlers as intake_handlers
from signoff_proposals.notifications import enqueue as notification_handlers
from signoff_proposals.outcomes import handlers as outcome_handlers
from signoff_proposals.pause_points import handlers as pause_point_handlers
from signoff_proposals.rejections import rejecting


def register(ctx: Context, broker: RabbitBroker) -> None:
    topo = ctx.topology
    senders = Senders.from_settings(ctx.settings)

    def consume(key: str, work: Callable[[Message], Awaitable[None]]) -> None:
        prefetch = ctx.settings.amqp.prefetch
        consumer.consume(broker, topo, senders, key, work, prefetch=prefetch, bind=True)

    # request-reply queues: a final failure still gets a typed rejection
    answered = {
        "proposals.requests": intake_handlers.answer,
        "proposals.pause-points": pause_point_handlers.answer,
    }
    for key, answer in answered.items():
        consume(key, _answering(ctx, broker, key, answer))
    _decisions(ctx, broker, senders)
    batching.consume_batched(
        broker,
        topo,
        senders,
        "proposals.outcomes",
        lambda tx, msgs: outcome_handlers.outcomes(ctx, tx, msgs),
        engine=ctx.engine,
        prefetch=ctx.settings.amqp.prefetch,
        size=ctx.settings.amqp.batch_size,
        bind=True,
    )
    consume("proposals.reconciliation", lambda msg: _checked(ctx, msg))
    batching.consume_runs(
        broker,
        topo,
        senders,
        "proposals.notifications",
        lambda msgs: notification_handlers.on_events(ctx, msgs),
        prefetch=ctx.settings.amqp.prefetch,
        size=ctx.settings.amqp.batch_size,
        bind=True,
    )


def _decisions(ctx: Context, broker: RabbitBroker, senders: Senders) -> None:
    """Approval commands, one at a time or (``approval_batch_size`` above 1) a batch at a time:
    one savepoint each, replies after the commit."""
    key = "proposals.approvals"

    async def each(tx: UnitOfWork, msg: Message) -> savepoints.Then:
        return await decision_handlers.answer_in_batch(
            ctx, tx, msg, lambda envelope: _reply(ctx, broker, msg, envelope)
        )

    savepoints.consume_each(
        broker,
        ctx.topology,
        senders,
        key,
        each,
        alone=_answering(ctx, broker, key, decision_handlers.answer),
        engine=ctx.engine,
        prefetch=ctx.settings.amqp.prefetch,
        size=ctx.settings.proposals.approval_batch_size,
        bind=True,
    )


async def _reply(ctx: Context, broker: RabbitBroker, msg: Message, envelope: Envelope) -> None:
    amqp = ctx.settings.amqp
    await rpc.answer(
        broker, msg, envelope, user_id=broker_user(amqp.url), timeout=amqp.publish_timeout_s
    )


async def _checked(ctx: Context, msg: Message) -> None:
    """Record the check, then notify of an escalation (each idempotent: a retry redoes neither)."""
    await outcome_handlers.reconciliation_checked(ctx, msg)
    await notification_handlers.on_reconciliation_checked(ctx, msg)


def _answering(
    ctx: Context,
    broker: RabbitBroker,
    key: str,
    answer: Callable[[Context, Message], Awaitable[Envelope]],
) -> Callable[[Message], Awaitable[None]]:
    return lambda msg: _answered(ctx, broker, msg, key, answer)


async def _answered(
    ctx: Context,
    broker: RabbitBroker,
    msg: Message,
    key: str,
    answer: Callable[[Context, Message], Awaitable[Envelope]],
) -> None:
    """The work for a request-reply queue: answer, and a final failure still gets a rejection."""

    async def reply(envelope: Envelope) -> None:
        await _reply(ctx, broker, msg, envelope)

    async def work() -> None:
        await reply(await answer(ctx, msg))

    await rejecting(msg, ctx.topology, key, work, reply)
