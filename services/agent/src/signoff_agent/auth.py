"""Who is calling: the token says who and which organization; the directory says whether still.

Only agent-audience tokens are accepted here (a proposals-audience token is for approving, and
the agent's API has no use for it).

The organization always comes from the verified token, never from a body or a model.
"""

from __future__ import annotations

from signoff_contracts.operations import Directory, Membership
from signoff_runtime.problems import Problem
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import AGENT_AUDIENCE, TokenInvalid, bearer, verify_token_async
from sqlalchemy.ext.asyncio import AsyncConnection


async def current_member(
    auth: AuthSettings, directory: Directory, conn: AsyncConnection, authorization: str | None
) -> Membership:
    try:
        claims = await verify_token_async(auth, bearer(authorization), audience=AGENT_AUDIENCE)
    except TokenInvalid:
        raise Problem(401, "unauthenticated", "A valid bearer token is required.") from None
    member = await directory.membership(conn, claims.sub, claims.org)
    if member is None:
        raise Problem(403, "forbidden", "You are not a member of this organization.")
    return member
