"""Reading proposals: the organization's list (keyset pages) and one proposal with its audit trail.

The caller is the shared current-member check (``http.caller``); another organization's proposal
is a 404, the same as an unknown id. Deciding lives in ``decisions.routes``, the reconciliation
page in ``outcomes.routes``, the pushed changes in ``events``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from signoff_contracts.status import ProposalStatus
from signoff_runtime.members import Caller, Reader
from sqlalchemy.engine import Row

from signoff_proposals.api.http import keyset, not_found
from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain
from signoff_proposals.lifecycle import repository as repo


async def visible(reader: Reader, proposal_id: str) -> Row[Any]:
    """The proposal if the caller's organization holds it, else a 404."""
    row = await repo.get(reader.conn, proposal_id)
    if row is None or row.organization_id != reader.organization_id:
        raise not_found()
    return row


def router(ctx: Context) -> APIRouter:
    api = APIRouter(prefix="/v1/proposals")

    @api.get("")
    async def list_proposals(
        reader: Caller,
        status: ProposalStatus | None = None,
        limit: Annotated[int, Query(ge=1)] = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        before, size = keyset(cursor, limit)
        rows = await repo.list_for_org(
            reader.conn, reader.organization_id, status=status, limit=size + 1, before_id=before
        )
        return domain.page(rows, size, repo.view)

    @api.get("/{proposal_id}")
    async def show(proposal_id: str, reader: Caller) -> dict[str, Any]:
        row = await visible(reader, proposal_id)
        trail = await repo.audit_trail(reader.conn, proposal_id)
        return {
            **repo.view(row).model_dump(mode="json"),
            "audit": [entry.model_dump(mode="json") for entry in trail],
        }

    return api
