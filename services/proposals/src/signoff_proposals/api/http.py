"""What every HTTP route of the service shares: the caller, the problem titles, the replies.

A decision route calls exactly what the AMQP command calls and translates its typed
``ApprovalReply`` here, once: a 2xx with the reply, or a problem document whose ``code`` is the
reply's result (401s carry ``WWW-Authenticate``), with two readings of its own — a pause point
that cannot be resolved any more is ``not_resolvable``, and a server-side failure (5xx) is named
by its reason. Reading routes take the caller from ``signoff_runtime.members.Caller`` (the shared
current-member check on a read connection); another organization's row is a 404, the same
as an unknown id.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from signoff_contracts.operations import Membership
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime import members
from signoff_runtime.problems import Problem
from signoff_runtime.tokens import PROPOSALS_AUDIENCE

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain
from signoff_proposals.metrics import APPROVAL_COMMANDS

TITLES = {
    "unauthenticated": members.UNAUTHENTICATED,
    "forbidden": "You may not do this.",
    "not_found": "No such proposal or pause point.",
    "not_approvable": "This proposal cannot be decided now.",
    "not_resolvable": "This pause point cannot be resolved any more.",
    "invalid": "The command is not valid.",
    "rate_limited": "Too many decisions from this person in a short time; try again shortly.",
}


def respond(command: str, reply: ApprovalReply) -> JSONResponse:
    """The HTTP answer to a decision's typed reply (counted by command and result)."""
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
    raise Problem(reply.http_status, code, TITLES.get(code, code), **extra)


def keyset(cursor: str | None, limit: int, prefix: str = "prp") -> tuple[str | None, int]:
    """Where a page starts (the cursor's id, ``None`` for the first) and how many it holds."""
    try:
        before = None if cursor is None else domain.decode_cursor(cursor, prefix)
    except domain.InvalidCursor:
        raise Problem(400, "invalid_cursor", "The cursor is not valid.") from None
    return before, domain.page_size(limit)


def not_found() -> Problem:
    return Problem(404, "not_found", TITLES["not_found"])


async def member_of(ctx: Context, authorization: str | None) -> Membership:
    """The current member, checked on a connection not kept for the request."""
    return await members.current_member_now(
        ctx.settings.auth, ctx.directory, ctx.engine, authorization, audience=PROPOSALS_AUDIENCE
    )
