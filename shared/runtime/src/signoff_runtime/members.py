"""Who is calling: the token says who and which organization; the directory says whether still.

The one check behind every authenticated route of every service. The person and organization
come from the verified token, never from a body, a path or a model; the directory must still
hold that person as a member of THAT organization (a token outlives a removal, a membership
row does not). ``current_member`` runs the check on the caller's connection (the agent's propose
route holds one transaction for it and the idempotency key); ``Caller`` is the same check as a
FastAPI dependency for reading routes (the service installs its ``Members`` on the app), yielding
the read connection it used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Header, Request
from signoff_contracts.operations import Directory, Membership
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_runtime.problems import Problem
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import TokenInvalid, bearer, verify_token_async

#: the ``Authorization`` request header, as every route reads it
Authorization = Annotated[str | None, Header()]
UNAUTHENTICATED = "A valid bearer token is required."
NOT_A_MEMBER = "You are not a member of this organization."


async def current_member(
    auth: AuthSettings,
    directory: Directory,
    conn: AsyncConnection,
    authorization: str | None,
    *,
    audience: str,
) -> Membership:
    """The caller's current membership, or a 401 (no valid token) / 403 (no longer a member)."""
    try:
        claims = await verify_token_async(auth, bearer(authorization), audience=audience)
    except TokenInvalid:
        raise Problem(401, "unauthenticated", UNAUTHENTICATED) from None
    member = await directory.membership(conn, claims.sub, claims.org)
    if member is None or member.organization_id != claims.org:
        raise Problem(403, "forbidden", NOT_A_MEMBER)
    return member


async def current_member_now(
    auth: AuthSettings,
    directory: Directory,
    engine: AsyncEngine,
    authorization: str | None,
    *,
    audience: str,
) -> Membership:
    """``current_member`` on a short connection of its own, returned at once: for routes that
    then hold the request open (streams, long polls) or need no connection afterwards."""
    async with engine.connect() as conn:
        return await current_member(auth, directory, conn, authorization, audience=audience)


@dataclass(frozen=True, slots=True)
class Reader:
    """A verified current member and the read connection the check ran on."""

    conn: AsyncConnection
    member: Membership

    @property
    def organization_id(self) -> str:
        return self.member.organization_id

    @property
    def user_id(self) -> str:
        return self.member.user_id


@dataclass(frozen=True, slots=True)
class Members:
    """What the check needs in one service: installed once as ``app.state.members``."""

    auth: AuthSettings
    directory: Directory
    engine: AsyncEngine
    audience: str

    def install(self, app: FastAPI) -> None:
        app.state.members = self


async def reading(request: Request, authorization: Authorization = None) -> AsyncIterator[Reader]:
    """The dependency behind ``Caller``: the check on a read connection, kept for the route."""
    check: Members = request.app.state.members
    async with check.engine.connect() as conn:
        member = await current_member(
            check.auth, check.directory, conn, authorization, audience=check.audience
        )
        yield Reader(conn, member)


#: a reading route's parameter: ``async def show(..., reader: Caller)``
Caller = Annotated[Reader, Depends(reading)]
