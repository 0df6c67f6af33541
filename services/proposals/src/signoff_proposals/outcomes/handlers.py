"""The ``proposals.outcomes`` and ``proposals.reconciliation`` consumers' work (no replies)."""

from __future__ import annotations

from faststream.rabbit.message import RabbitMessage as Message
from signoff_contracts.v1 import OutcomeReported, ReconciliationChecked

from signoff_proposals.context import Context
from signoff_proposals.outcomes import reconciliation, recording


async def outcome(ctx: Context, msg: Message) -> None:
    await recording.record(ctx, OutcomeReported.model_validate_json(msg.body))


async def reconciliation_checked(ctx: Context, msg: Message) -> None:
    await reconciliation.record(ctx, ReconciliationChecked.model_validate_json(msg.body))
