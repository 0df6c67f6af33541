"""HTTP for decisions: approve, decline, withdraw and revise a pending proposal.

Each route calls exactly what the AMQP approval command calls (``decide``, ``withdrawals``,
``revisions``) inside one unit of work, and ``http.respond`` translates the typed reply.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from signoff_runtime.members import Authorization
from signoff_runtime.tokens import bearer
from signoff_runtime.unit_of_work import unit_of_work

from signoff_proposals.api.http import respond
from signoff_proposals.context import Context
from signoff_proposals.decisions import decide, revisions, withdrawals


class DeclineBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500)


class ReviseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request: dict[str, Any]


def router(ctx: Context) -> APIRouter:
    api = APIRouter(prefix="/v1/proposals")

    @api.post("/{proposal_id}/approve")
    async def approve(proposal_id: str, authorization: Authorization = None) -> JSONResponse:
        async with unit_of_work(ctx.engine) as tx:
            reply = await decide.approve(ctx, tx, bearer(authorization), proposal_id)
        return respond("approve", reply)

    @api.post("/{proposal_id}/decline")
    async def decline(
        proposal_id: str, body: DeclineBody | None = None, authorization: Authorization = None
    ) -> JSONResponse:
        reason = body.reason if body is not None else None
        async with unit_of_work(ctx.engine) as tx:
            reply = await decide.decline(ctx, tx, bearer(authorization), proposal_id, reason)
        return respond("decline", reply)

    @api.post("/{proposal_id}/withdraw")
    async def withdraw(
        proposal_id: str, body: DeclineBody | None = None, authorization: Authorization = None
    ) -> JSONResponse:
        """The proposer (or a manager) takes a pending proposal back: ``withdrawn``."""
        reason = body.reason if body is not None else None
        async with unit_of_work(ctx.engine) as tx:
            reply = await withdrawals.withdraw(ctx, tx, bearer(authorization), proposal_id, reason)
        return respond("withdraw", reply)

    @api.post("/{proposal_id}/revise")
    async def revise(
        proposal_id: str, body: ReviseBody, authorization: Authorization = None
    ) -> JSONResponse:
        try:
            async with unit_of_work(ctx.engine) as tx:
                reply = await revisions.revise(
                    ctx, tx, bearer(authorization), proposal_id, body.request
                )
        except revisions.Unremembered as unremembered:
            reply = unremembered.reply
        return respond("revise", reply)

    return api
