"""HTTP for approval policies: ``GET /v1/policies``, ``GET`` and ``PUT /v1/policies/{kind}``.

The organization is the token's; only those the operation would let approve (managers, in the
club) may read or change its policy. A refused policy is a 422 problem (``invalid_policy``)
listing what is wrong, rule by rule; an operation not installed is a 404.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from signoff_contracts.operations import Actor
from signoff_runtime.members import Caller, Reader
from signoff_runtime.problems import Problem
from signoff_runtime.registry import UnknownOperation

from signoff_proposals.context import Context
from signoff_proposals.policies import domain, manage
from signoff_proposals.policies import repository as policies


def _actor(reader: Reader) -> Actor:
    member = reader.member
    return Actor(user_id=member.user_id, organization_id=member.organization_id, role=member.role)


def _check(ctx: Context, reader: Reader, kind: str | None = None) -> None:
    try:
        allowed = manage.may_manage(ctx.operations, _actor(reader), kind)
    except UnknownOperation:
        raise Problem(404, "not_found", "No such operation.") from None
    if not allowed:
        raise Problem(403, "forbidden", "Only managers may see or change approval policies.")


def router(ctx: Context) -> APIRouter:
    api = APIRouter(prefix="/v1/policies")

    @api.get("")
    async def list_policies(reader: Caller) -> dict[str, Any]:
        _check(ctx, reader)
        items = await manage.listing(reader.conn, ctx.operations, reader.organization_id)
        return {"items": items, "next_cursor": None}

    @api.get("/{kind}")
    async def show(kind: str, reader: Caller) -> dict[str, Any]:
        _check(ctx, reader, kind)
        versions = await policies.history(reader.conn, reader.organization_id, kind)
        return {
            **manage.shown(ctx.operations, kind, versions[-1] if versions else None),
            "history": [manage.shown(ctx.operations, kind, v) for v in reversed(versions)],
        }

    @api.put("/{kind}")
    async def put(kind: str, body: domain.Policy, reader: Caller) -> dict[str, Any]:
        _check(ctx, reader, kind)
        try:
            async with ctx.engine.begin() as conn:
                saved = await manage.save(
                    conn, ctx.operations, reader.organization_id, kind, body, reader.user_id
                )
        except manage.PolicyRefused as refused:
            raise Problem(
                422, "invalid_policy", "The policy cannot be saved.", problems=refused.problems
            ) from None
        return manage.shown(ctx.operations, kind, saved)

    return api
