"""The ``proposals.outcomes`` and ``proposals.reconciliation`` consumers' work (no replies)."""

from __future__ import annotations

from collections.abc import Sequence

from faststream.rabbit.message import RabbitMessage as Message
from signoff_contracts.v1 import OutcomeReported, ReconciliationChecked
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.context import Context
from signoff_proposals.outcomes import reconciliation, recording


async def outcomes(ctx: Context, tx: UnitOfWork, msgs: Sequence[Message]) -> None:
    """A batch of outcome reports, recorded on ``tx`` (``signoff_runtime.batching``)."""
    reports = [OutcomeReported.model_validate_json(msg.body) for msg in msgs]
    await recording.record_all(ctx, tx, reports)


async def reconciliation_checked(ctx: Context, msg: Message) -> None:
    await reconciliation.record(ctx, ReconciliationChecked.model_validate_json(msg.body))
