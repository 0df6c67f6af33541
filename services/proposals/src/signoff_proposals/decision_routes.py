"""HTTP for revisions and pause points: the same code paths as the AMQP commands, translated.

``POST /v1/proposals/{id}/revise`` calls ``revisions.revise`` and ``POST
/v1/pause-points/{id}/resolve`` calls ``pause_points.resolve`` — exactly what the AMQP
``ReviseProposal`` / ``ResolvePausePoint`` commands call. A typed ``ApprovalReply`` becomes a 200
with the reply, or a problem document whose ``code`` is the reply's result, with two readings of
their own: a pause point that cannot be resolved any more is ``not_resolvable`` (its reason
``resolved`` or ``expired``, the stored resolution shown), and a server-side failure (5xx) is
named by its reason.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.status import PausePointStatus
from signoff_contracts.v1 import ApprovalReply
from signoff_runtime.problems import Problem
from signoff_runtime.tokens import PROPOSALS_AUDIENCE, TokenInvalid, bearer, verify_token_async
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals import domain, pause_points, revisions
from signoff_proposals import pause_repository as pause_repo
from signoff_proposals import repository as repo
from signoff_proposals.context import Context
from signoff_proposals.metrics import APPROVAL_COMMANDS
from signoff_proposals.pause_rules import Resolution
from signoff_proposals.routes import keyset

Authorization = Annotated[str | None, Header()]

_TITLES = {
    "unauthenticated": "A valid bearer token is required.",
    "forbidden": "You may not do this.",
    "not_found": "No such proposal or pause point.",
    "not_approvable": "This proposal cannot be revised now.",
    "not_resolvable": "This pause point cannot be resolved any more.",
    "invalid": "The command is not valid.",
    "rate_limited": "Too many decisions from this person in a short time; try again shortly.",
}


class ReviseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request: dict[str, Any]


class ResolveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["approve", "decline", "option", "data"]
    option: str | None = Field(default=None, max_length=200)
    data: dict[str, Any] | None = None
    reply: str | None = Field(default=None, max_length=2000)
    #: the person's edit of the pause point's ``payload`` (the seed's payload override)
    payload: dict[str, Any] | None = None


def router(ctx: Context) -> APIRouter:
    api = APIRouter(prefix="/v1")

    @api.post("/proposals/{proposal_id}/revise")
    async def revise(
        proposal_id: str, body: ReviseBody, authorization: Authorization = None
    ) -> JSONResponse:
        try:
            async with repo.unit_of_work(ctx.engine) as tx:
                reply = await revisions.revise(
                    ctx, tx, bearer(authorization), proposal_id, body.request
                )
        except revisions.Unremembered as unremembered:
            reply = unremembered.reply
        return _respond("revise", reply)

    async def reader(conn: AsyncConnection, authorization: str | None) -> tuple[str, str]:
        """The caller's organization and id, from the verified token and a current membership."""
        try:
            claims = await verify_token_async(
                ctx.settings.auth, bearer(authorization), audience=PROPOSALS_AUDIENCE
            )
        except TokenInvalid:
            raise Problem(401, "unauthenticated", _TITLES["unauthenticated"]) from None
        member = await ctx.directory.membership(conn, claims.sub, claims.org)
        if member is None or member.organization_id != claims.org:
            raise Problem(403, "forbidden", _TITLES["forbidden"])
        return claims.org, claims.sub

    @api.get("/pause-points")
    async def list_pause_points(
        authorization: Authorization = None,
        status: PausePointStatus | None = None,
        limit: Annotated[int, Query(ge=1)] = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        before, size = keyset(cursor, limit, "pp")
        async with ctx.engine.connect() as conn:
            org, user = await reader(conn, authorization)
            # the inbox holds only what the reader may answer: their own and the team's
            rows = await pause_repo.list_answerable(
                conn, org, user, status=status, limit=size + 1, before_id=before
            )
        return domain.page(rows, size, pause_repo.view)

    @api.get("/pause-points/{pause_point_id}")
    async def show(pause_point_id: str, authorization: Authorization = None) -> dict[str, Any]:
        async with ctx.engine.connect() as conn:
            org, user = await reader(conn, authorization)
            row = await pause_repo.get(conn, pause_point_id)
        # someone else's owner-only pause point is as invisible as another organization's
        if row is None or row.organization_id != org or not pause_repo.may_answer(row, user):
            raise Problem(404, "not_found", _TITLES["not_found"])
        return pause_repo.view(row).model_dump(mode="json")

    @api.post("/pause-points/{pause_point_id}/resolve")
    async def resolve(
        pause_point_id: str, body: ResolveBody, authorization: Authorization = None
    ) -> JSONResponse:
        answer = Resolution(body.action, body.option, body.data, body.reply, body.payload)
        async with repo.unit_of_work(ctx.engine) as tx:
            reply = await pause_points.resolve(
                ctx, tx, bearer(authorization), pause_point_id, answer
            )
        return _respond("resolve", reply)

    return api


def _respond(command: str, reply: ApprovalReply) -> JSONResponse:
    APPROVAL_COMMANDS.labels(channel="http", command=command, result=reply.result).inc()
    if reply.http_status < 400:
        return JSONResponse(reply.model_dump(mode="json"), status_code=reply.http_status)
    code: str = reply.result
    if reply.http_status >= 500 and reply.reason is not None:
        code = reply.reason.code
    elif code == "not_approvable" and command == "resolve":
        code = "not_resolvable"
    extra: dict[str, Any] = {}
    for field in ("reason", "proposal", "pause_point"):
        if (value := getattr(reply, field)) is not None:
            extra[field] = value.model_dump(mode="json")
    raise Problem(reply.http_status, code, _TITLES.get(code, code), **extra)
