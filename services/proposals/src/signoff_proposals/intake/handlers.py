"""The ``proposals.requests`` consumer's work: a v2 ``ProposalRequested`` in, its typed reply out.

A v1 request carried arguments, a preview or a person of the agent's own making and is refused
(``unsupported_version``, dead-lettered) — except under the negative control
``SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT`` (``trusted``). A request that does not parse is answered
``invalid`` when it left a reply address, else dead-lettered.
"""

from __future__ import annotations

import json

from faststream.rabbit.message import RabbitMessage as Message
from pydantic import ValidationError
from signoff_contracts import v1, v2
from signoff_contracts.v1 import Envelope
from signoff_runtime.consumer import PermanentError

from signoff_proposals.context import Context
from signoff_proposals.intake import store, trusted


def version(body: bytes) -> object:
    """The envelope's ``version`` (1 when absent: the v1 default), or ``None`` if unreadable."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document.get("version", 1) if isinstance(document, dict) else None


def refuse_v1(body: bytes) -> None:
    if version(body) == 1:
        raise PermanentError(
            "unsupported_version",
            "a v1 request carries what the agent made; the proposals service takes v2 only",
        )


async def answer(ctx: Context, msg: Message) -> Envelope:
    if ctx.settings.unsafe.trust_agent_contract and version(msg.body) == 1:
        return await trusted.store(ctx, v1.ProposalRequested.model_validate_json(msg.body))
    refuse_v1(msg.body)
    try:
        request = v2.ProposalRequested.model_validate_json(msg.body)
    except ValidationError:
        if not msg.reply_to:
            raise
        return store.invalid_request(msg.raw_message.correlation_id)
    return await store.store(ctx, request)
