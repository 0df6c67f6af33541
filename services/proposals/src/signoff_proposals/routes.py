"""The HTTP API: list and show proposals, approve, decline, withdraw, the reconciliation page.

Approve, decline and withdraw call exactly what the AMQP commands call (``decide``); this module
only translates the typed ``ApprovalReply`` into HTTP: a 200 with the reply, or a problem document
whose ``code`` is the reply's result (401s carry ``WWW-Authenticate``). Reading routes check the
token and the person's current membership; another organization's proposal is a 404, the same
as an unknown id.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.operations import Membership
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import ApprovalReply
from signoff_runtime.problems import Problem
from signoff_runtime.tokens import PROPOSALS_AUDIENCE, TokenInvalid, bearer, verify_token_async

from signoff_proposals import decide, domain, withdrawals
from signoff_proposals import reconciliation as reconciliation_checks
from signoff_proposals import repository as repo
from signoff_proposals.context import Context
from signoff_proposals.metrics import APPROVAL_COMMANDS

Authorization = Annotated[str | None, Header()]

_TITLES = {
    "unauthenticated": "A valid bearer token is required.",
    "forbidden": "You may not do this.",
    "not_found": "No such proposal.",
    "not_approvable": "This proposal cannot be decided now.",
    "invalid": "The command is not valid.",
}


class DeclineBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500)


def keyset(cursor: str | None, limit: int, prefix: str = "prp") -> tuple[str | None, int]:
    """Where a page starts (the cursor's id, ``None`` for the first) and how many it holds."""
    try:
        before = None if cursor is None else domain.decode_cursor(cursor, prefix)
    except domain.InvalidCursor:
        raise Problem(400, "invalid_cursor", "The cursor is not valid.") from None
    return before, domain.page_size(limit)


def router(ctx: Context) -> APIRouter:
    api = APIRouter(prefix="/v1/proposals")

    @api.get("")
    async def list_proposals(
        authorization: Authorization = None,
        status: ProposalStatus | None = None,
        limit: Annotated[int, Query(ge=1)] = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        before, size = keyset(cursor, limit)
        async with ctx.engine.connect() as conn:
            member = await _member(ctx, conn, authorization)
            rows = await repo.list_for_org(
                conn, member.organization_id, status=status, limit=size + 1, before_id=before
            )
        return domain.page(rows, size, repo.view)

    @api.get("/{proposal_id}")
    async def show(proposal_id: str, authorization: Authorization = None) -> dict[str, Any]:
        async with ctx.engine.connect() as conn:
            row = await _visible(ctx, conn, authorization, proposal_id)
            trail = await repo.audit_trail(conn, proposal_id)
        return {
            **repo.view(row).model_dump(mode="json"),
            "audit": [entry.model_dump(mode="json") for entry in trail],
        }

    @api.get("/{proposal_id}/reconciliation")
    async def reconciliation(
        proposal_id: str, authorization: Authorization = None
    ) -> dict[str, Any]:
        """The ``status_path`` of a ``NeedsReconciliation``: the attempt and every check."""
        async with ctx.engine.connect() as conn:
            row = await _visible(ctx, conn, authorization, proposal_id)
            found = await reconciliation_checks.history(conn, proposal_id)
        return reconciliation_checks.page(row, found)

    @api.post("/{proposal_id}/approve")
    async def approve(proposal_id: str, authorization: Authorization = None) -> JSONResponse:
        async with repo.unit_of_work(ctx.engine) as tx:
            reply = await decide.approve(ctx, tx, bearer(authorization), proposal_id)
        return _respond("approve", reply)

    @api.post("/{proposal_id}/decline")
    async def decline(
        proposal_id: str, body: DeclineBody | None = None, authorization: Authorization = None
    ) -> JSONResponse:
        reason = body.reason if body is not None else None
        async with repo.unit_of_work(ctx.engine) as tx:
            reply = await decide.decline(ctx, tx, bearer(authorization), proposal_id, reason)
        return _respond("decline", reply)

    @api.post("/{proposal_id}/withdraw")
    async def withdraw(
        proposal_id: str, body: DeclineBody | None = None, authorization: Authorization = None
    ) -> JSONResponse:
        """The proposer (or a manager) takes a pending proposal back: ``withdrawn``."""
        reason = body.reason if body is not None else None
        async with repo.unit_of_work(ctx.engine) as tx:
            reply = await withdrawals.withdraw(ctx, tx, bearer(authorization), proposal_id, reason)
        return _respond("withdraw", reply)

    return api


def _respond(command: str, reply: ApprovalReply) -> JSONResponse:
    APPROVAL_COMMANDS.labels(channel="http", command=command, result=reply.result).inc()
    if reply.http_status < 400:
        return JSONResponse(reply.model_dump(mode="json"), status_code=reply.http_status)
    extra: dict[str, Any] = {}
    if reply.reason is not None:
        extra["reason"] = reply.reason.model_dump(mode="json")
    if reply.proposal is not None:
        extra["proposal"] = reply.proposal.model_dump(mode="json")
    raise Problem(reply.http_status, reply.result, _TITLES.get(reply.result, reply.result), **extra)


async def _member(ctx: Context, conn: Any, authorization: str | None) -> Membership:
    try:
        claims = await verify_token_async(
            ctx.settings.auth, bearer(authorization), audience=PROPOSALS_AUDIENCE
        )
    except TokenInvalid:
        raise Problem(401, "unauthenticated", _TITLES["unauthenticated"]) from None
    member = await ctx.directory.membership(conn, claims.sub, claims.org)
    if member is None or member.organization_id != claims.org:
        raise Problem(403, "forbidden", _TITLES["forbidden"])
    return member


async def _visible(ctx: Context, conn: Any, authorization: str | None, proposal_id: str) -> Any:
    member = await _member(ctx, conn, authorization)
    row = await repo.get(conn, proposal_id)
    if row is None or row.organization_id != member.organization_id:
        raise Problem(404, "not_found", _TITLES["not_found"])
    return row
