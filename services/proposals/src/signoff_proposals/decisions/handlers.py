"""The ``proposals.approvals`` consumer's work: an approval command in, its reply out."""

from __future__ import annotations

from faststream.rabbit.message import RabbitMessage as Message
from pydantic import ValidationError
from signoff_contracts.v1 import Envelope, approval_command_adapter

from signoff_proposals.context import Context
from signoff_proposals.decisions import commands, decide
from signoff_proposals.lifecycle import domain
from signoff_proposals.metrics import APPROVAL_COMMANDS


async def answer(ctx: Context, msg: Message) -> Envelope:
    try:
        command = approval_command_adapter.validate_json(msg.body)
    except ValidationError:
        if not msg.reply_to:
            raise
        APPROVAL_COMMANDS.labels(channel="amqp", command="invalid", result="invalid").inc()
        return decide.reply(domain.INVALID_MESSAGE)
    reply = await commands.answer(ctx, command)
    APPROVAL_COMMANDS.labels(
        channel="amqp", command=commands.COMMAND_NAMES[command.type], result=reply.result
    ).inc()
    return reply
