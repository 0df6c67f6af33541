"""Resolving a revised request for the proposals service (``ResolveRequested`` → ``ResolveReply``).

Only the agent runs an operation's ``resolve``. A person edits a pending proposal's request; the
proposals service asks here for the new frozen contract, and supersedes the old proposal with
it in one transaction of its own. This side rebuilds the scope from the message (never from the
edited request), checks that the person is still a member of that organization, parses the
edited request with the operation's *latest* version — unknown fields refused — and resolves
it. The reply is the contract, or a reason code; it never carries a stack trace.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from signoff_contracts.operations import Directory, Rejected, Scope
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import ResolveReply, ResolveRequested
from signoff_runtime.registry import Operations, UnknownOperation
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_agent.metrics import RESOLVES

SOURCE = "agent"


def _reply(msg: ResolveRequested, **fields: Any) -> ResolveReply:
    reply = ResolveReply(
        source=SOURCE, correlation_id=msg.proposal_id, causation_id=msg.message_id, **fields
    )
    RESOLVES.labels(
        result="accepted" if reply.accepted else reply.reason.code if reply.reason else "?"
    ).inc()
    return reply


def invalid(correlation_id: str | None) -> ResolveReply:
    """The reply to a request that did not even parse (when it left a reply address)."""
    RESOLVES.labels(result="invalid_message").inc()
    return ResolveReply(
        accepted=False,
        reason=Reason(code="invalid_message"),
        source=SOURCE,
        correlation_id=correlation_id,
    )


def rejected(msg: ResolveRequested, code: str, **params: Any) -> ResolveReply:
    return _reply(msg, accepted=False, reason=Reason(code=code, params=params))


async def resolve(
    conn: AsyncConnection, msg: ResolveRequested, operations: Operations, directory: Directory
) -> ResolveReply:
    member = await directory.membership(conn, msg.requested_by, msg.organization_id)
    if member is None:
        return rejected(msg, "forbidden")
    try:
        op = operations.latest(msg.operation_kind)
    except UnknownOperation:
        return rejected(msg, "unknown_operation", kind=msg.operation_kind)
    if op.section != msg.section:
        return rejected(msg, "unknown_operation", kind=msg.operation_kind)
    try:
        request = op.parse_request(msg.request)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "(request)"
        return rejected(msg, "invalid_request", field=field[:64], problem=first["type"][:64])
    scope = Scope(
        organization_id=msg.organization_id, section=op.section, resource_id=msg.resource_id
    )
    try:
        resolved = await op.resolve(request, scope, conn)
    except Rejected as exc:
        return _reply(msg, accepted=False, reason=exc.reason)
    return _reply(
        msg,
        accepted=True,
        contract_version=op.version,
        request=request.model_dump(mode="json"),
        arguments=resolved.arguments.model_dump(mode="json"),
        preview=resolved.preview.model_dump(mode="json"),
    )
