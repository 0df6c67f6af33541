"""The ``proposals.approvals`` consumer's work: an approval command in, its reply out.

``answer`` decides one command in a transaction of its own (and is how a command is settled by
itself); ``answer_in_batch`` decides one on a batch's transaction, inside its own savepoint
(``signoff_runtime.savepoints``), and hands back the reply to publish once the batch has
committed. Both parse, rate-limit, decide (``commands``) and count alike, so a command gets the
same reply, audit rows and metrics either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream.rabbit.message import RabbitMessage as Message
from pydantic import ValidationError
from signoff_contracts.v1 import ApprovalCommand, Envelope, approval_command_adapter
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.savepoints import Then, Undo
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.context import Context
from signoff_proposals.decisions import commands, decide, revisions
from signoff_proposals.lifecycle import domain
from signoff_proposals.metrics import APPROVAL_COMMANDS

#: publishes a reply to the request it answers
Reply = Callable[[Envelope], Awaitable[None]]


async def answer(ctx: Context, msg: Message) -> Envelope:
    command = _parsed(msg)
    if isinstance(command, ApprovalReply):
        _count(None, command)
        return command
    reply = await commands.answer(ctx, command)
    _count(command, reply)
    return reply


async def answer_in_batch(ctx: Context, tx: UnitOfWork, msg: Message, send: Reply) -> Then:
    """Decide ``msg`` on the batch's ``tx``; what to do once it has committed: count and reply.
    A command refused for a quota undoes its savepoint (``Undo``) and is answered all the same."""
    command = _parsed(msg)
    if isinstance(command, ApprovalReply):
        return _then(None, command, send)
    reply = commands.over_rate(ctx, command)
    if reply is None:
        try:
            reply = await commands.decided(ctx, tx, command)
        except revisions.Unremembered as unremembered:
            raise Undo(_then(command, unremembered.reply, send)) from None
    return _then(command, reply, send)


def _then(command: ApprovalCommand | None, reply: ApprovalReply, send: Reply) -> Then:
    async def then() -> None:
        _count(command, reply)
        await send(reply)

    return then


def _parsed(msg: Message) -> ApprovalCommand | ApprovalReply:
    """The command, or the ``invalid`` reply to a request that does not parse (one without a
    reply address raises: it is dead-lettered)."""
    try:
        return approval_command_adapter.validate_json(msg.body)
    except ValidationError:
        if not msg.reply_to:
            raise
        return decide.reply(domain.INVALID_MESSAGE)


def _count(command: ApprovalCommand | None, reply: ApprovalReply) -> None:
    name = "invalid" if command is None else commands.COMMAND_NAMES[command.type]
    APPROVAL_COMMANDS.labels(channel="amqp", command=name, result=reply.result).inc()
