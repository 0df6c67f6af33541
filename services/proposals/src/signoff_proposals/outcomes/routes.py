"""``GET /v1/proposals/{id}/reconciliation``: the ``status_path`` of a ``NeedsReconciliation``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from signoff_runtime.members import Caller
from signoff_runtime.openapi import ok

from signoff_proposals.api.bodies import ReconciliationPage
from signoff_proposals.api.proposals import visible
from signoff_proposals.context import Context
from signoff_proposals.outcomes import reconciliation


def router(ctx: Context) -> APIRouter:
    api = APIRouter(prefix="/v1/proposals")

    @api.get("/{proposal_id}/reconciliation", **ok(ReconciliationPage, 404))
    async def show_reconciliation(proposal_id: str, reader: Caller) -> dict[str, Any]:
        """The uncertain attempt and every check the reconciler made of it."""
        row = await visible(reader, proposal_id)
        found = await reconciliation.history(reader.conn, proposal_id)
        return reconciliation.page(row, found)

    return api
