"""Who a request from the agent speaks for — decided here, never taken from the agent.

The agent is the most exposed service (it handles the model's output), so the person and the
organization of a proposal or a pause point are never fields it fills. A request carries either
the person's bearer token, verified here (``verify_agent_token``: the one place tokens from the
agent are checked), or — for a turn started by an event, which has no token — ``resumed_from``:
a pause point of the same conversation that a person resolved within
``SIGNOFF_PROPOSALS__RESUME_WINDOW_S``, whose stored requester and organization are used. Either
way the person's *current* membership is re-read through the domain's directory, so a token (or
a resolution) outlives no membership.

What a taken-over agent can still do with this: speak for people whose tokens it sees during
their own turns (until those expire), or for a conversation's person shortly after they answered
one of its pause points. It can only *propose* — the contract is resolved here and a person
still approves exactly what they are shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from signoff_contracts.operations import Membership
from signoff_contracts.reasons import Reason
from signoff_contracts.status import PausePointStatus
from signoff_runtime.tokens import AGENT_AUDIENCE, Claims, TokenInvalid, verify_token_async
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.context import Context
from signoff_proposals.pause_points import repository as pause_repo

Via = Literal["token", "resumed_from"]


class NotIdentified(Exception):
    """Nobody can be named: ``unauthenticated`` (a bad credential) or ``forbidden`` (a person
    who is not a member now)."""

    def __init__(self, refusal: Literal["unauthenticated", "forbidden"], code: str) -> None:
        super().__init__(code)
        self.refusal = refusal
        self.reason = Reason(code=code)


@dataclass(frozen=True, slots=True)
class Person:
    member: Membership
    via: Via

    @property
    def user_id(self) -> str:
        return self.member.user_id

    @property
    def organization_id(self) -> str:
        return self.member.organization_id


async def verify_agent_token(ctx: Context, token: str | None) -> Claims:
    """A person's token as forwarded by the agent; raises ``TokenInvalid``.

    The one place the proposals service checks such a token: the agent's audience only (the
    token the person gave the agent, which can propose but never approve)."""
    return await verify_token_async(ctx.settings.auth, token, audience=AGENT_AUDIENCE)


async def identify(
    ctx: Context,
    conn: AsyncConnection,
    *,
    token: str | None,
    resumed_from: str | None,
    conversation_id: str | None,
) -> Person:
    """The person the request speaks for, a current member of their organization."""
    via: Via
    if token is not None:
        try:
            claims = await verify_agent_token(ctx, token)
        except TokenInvalid:
            raise NotIdentified("unauthenticated", "unauthenticated") from None
        user, org, via = claims.sub, claims.org, "token"
    else:
        user, org = await _resumed(ctx, conn, resumed_from, conversation_id)
        via = "resumed_from"
    member = await ctx.directory.membership(conn, user, org)
    if member is None or member.organization_id != org or member.user_id != user:
        raise NotIdentified("forbidden", "not_a_member")
    return Person(member, via)


async def _resumed(
    ctx: Context, conn: AsyncConnection, pause_point_id: str | None, conversation_id: str | None
) -> tuple[str, str]:
    """The requester and organization of a recently resolved pause point of the conversation."""
    row = None if pause_point_id is None else await pause_repo.get(conn, pause_point_id)
    window = timedelta(seconds=ctx.settings.proposals.resume_window_s)
    if (
        row is None
        or conversation_id is None
        or row.conversation_id != conversation_id
        or row.status != PausePointStatus.RESOLVED
        or row.resolved_at is None
        or row.resolved_at + window < row.now
    ):
        raise NotIdentified("unauthenticated", "resumed_from_not_usable")
    return str(row.requested_by), str(row.organization_id)
