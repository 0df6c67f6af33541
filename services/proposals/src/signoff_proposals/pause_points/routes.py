"""HTTP for pause points: the inbox of what the caller may answer, one pause point, resolving it.

``POST /v1/pause-points/{id}/resolve`` calls ``lifecycle.resolve`` — exactly what the AMQP
``ResolvePausePoint`` command calls — and ``http.respond`` translates the typed reply (a pause
point that cannot be resolved any more is ``not_resolvable``, its stored resolution shown).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.status import PausePointStatus
from signoff_runtime.members import Authorization, Caller
from signoff_runtime.tokens import bearer
from signoff_runtime.unit_of_work import unit_of_work

from signoff_proposals.api.http import keyset, not_found, respond
from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain
from signoff_proposals.pause_points import lifecycle as pause_points
from signoff_proposals.pause_points import repository as pause_repo
from signoff_proposals.pause_points.rules import Resolution


class ResolveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["approve", "decline", "option", "data"]
    option: str | None = Field(default=None, max_length=200)
    data: dict[str, Any] | None = None
    reply: str | None = Field(default=None, max_length=2000)
    #: the person's edit of the pause point's ``payload`` (the seed's payload override)
    payload: dict[str, Any] | None = None


def router(ctx: Context) -> APIRouter:
    api = APIRouter(prefix="/v1/pause-points")

    @api.get("")
    async def list_pause_points(
        reader: Caller,
        status: PausePointStatus | None = None,
        limit: Annotated[int, Query(ge=1)] = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        before, size = keyset(cursor, limit, "pp")
        # the inbox holds only what the reader may answer: their own and the team's
        rows = await pause_repo.list_answerable(
            reader.conn,
            reader.organization_id,
            reader.user_id,
            status=status,
            limit=size + 1,
            before_id=before,
        )
        return domain.page(rows, size, pause_repo.view)

    @api.get("/{pause_point_id}")
    async def show(pause_point_id: str, reader: Caller) -> dict[str, Any]:
        row = await pause_repo.get(reader.conn, pause_point_id)
        # someone else's owner-only pause point is as invisible as another organization's
        if (
            row is None
            or row.organization_id != reader.organization_id
            or not pause_repo.may_answer(row, reader.user_id)
        ):
            raise not_found()
        return pause_repo.view(row).model_dump(mode="json")

    @api.post("/{pause_point_id}/resolve")
    async def resolve(
        pause_point_id: str, body: ResolveBody, authorization: Authorization = None
    ) -> JSONResponse:
        answer = Resolution(body.action, body.option, body.data, body.reply, body.payload)
        async with unit_of_work(ctx.engine) as tx:
            reply = await pause_points.resolve(
                ctx, tx, bearer(authorization), pause_point_id, answer
            )
        return respond("resolve", reply)

    return api
