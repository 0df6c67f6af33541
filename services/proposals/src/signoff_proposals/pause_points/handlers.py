"""The ``proposals.pause-points`` consumer's work: a ``PausePointRequested`` in, its reply out."""

from __future__ import annotations

from faststream.rabbit.message import RabbitMessage as Message
from pydantic import ValidationError
from signoff_contracts import v2
from signoff_contracts.v1 import Envelope

from signoff_proposals.context import Context
from signoff_proposals.intake.handlers import refuse_v1
from signoff_proposals.pause_points import lifecycle


async def answer(ctx: Context, msg: Message) -> Envelope:
    refuse_v1(msg.body)
    try:
        request = v2.PausePointRequested.model_validate_json(msg.body)
    except ValidationError as exc:
        if not msg.reply_to:
            raise
        return lifecycle.invalid_request(msg.body, exc)
    return await lifecycle.store(ctx, request)
