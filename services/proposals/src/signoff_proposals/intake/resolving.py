"""Making a contract: the operation's ``resolve``, run here and only here.

A proposal's ``Arguments`` (what will run) and ``Preview`` (what a person approves) come from ONE
call of the operation's ``resolve``, on the request the agent (or a person revising) asked for and
a scope this service built — never from values sent in. Both are parsed back into the
operation's own types before they are stored, so a contract that could not be read at approval
is never stored.

``resolve`` reads the domain on the caller's connection inside a savepoint made read-only
(``SET LOCAL transaction_read_only``) and rolled back afterwards (``unit_of_work.read_only``):
whatever an operation's code tries, it cannot write from here — defence in depth beside the
service's read-only database grants on the domain. Rolling the savepoint back also restores
read-write for the writes of the same transaction (storing the proposal, superseding the old
one).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError
from signoff_contracts.operations import AnyOperation, Rejected, Resolved, Scope
from signoff_contracts.reasons import Reason
from signoff_contracts.v1.proposals import Refusal
from signoff_runtime.unit_of_work import read_only
from signoff_runtime.validation import field_errors
from sqlalchemy.ext.asyncio import AsyncConnection


class Refused(Exception):
    """The request cannot become a proposal; raised inside a transaction, it rolls it back."""

    def __init__(self, refusal: Refusal, code: str, **params: Any) -> None:
        super().__init__(code)
        self.refusal: Refusal = refusal
        self.reason = Reason(code=code, params=params)


def parse_request(op: AnyOperation, data: Any) -> BaseModel:
    """The operation's ``Request`` (unknown fields refused); ``Refused(invalid)`` naming the
    first field that does not fit."""
    try:
        parsed: BaseModel = op.parse_request(data)
    except ValidationError as exc:
        [first] = field_errors(exc, limit=1)
        field = first.field or "(request)"
        raise Refused(
            "invalid", "invalid_request", kind=op.kind, field=field[:64], problem=first.type[:64]
        ) from None
    return parsed


async def resolve(
    conn: AsyncConnection, op: AnyOperation, request: BaseModel, scope: Scope
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(arguments, preview)`` as JSON, from one ``resolve`` in a read-only savepoint;
    ``Refused(rejected)`` with the operation's own reason."""
    try:
        async with read_only(conn):
            resolved: Resolved[Any, Any] = await op.resolve(request, scope, conn)
    except Rejected as exc:
        raise Refused("rejected", exc.reason.code, **exc.reason.params) from None
    arguments = resolved.arguments.model_dump(mode="json")
    preview = resolved.preview.model_dump(mode="json")
    # what is stored must parse back at approval and execution: check it before storing
    op.parse_arguments(arguments)
    op.parse_preview(preview)
    return arguments, preview
