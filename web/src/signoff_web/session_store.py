"""Server-side sessions: started at sign-in, checked on every request, revoked at sign-out.

``install`` adds a middleware that puts the request's live session (or ``None``) on
``request.state.session``, where ``context.session`` finds it: a cookie counts only if its
signature holds, it has not expired, *and* its row in ``web.sessions`` is neither revoked nor
expired. So a cookie copied before sign-out is refused after it, and an operator can end every
session of a person at once (``revoke_person``). Static files, health and metrics are not
looked up (they need no session).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_web import sessions
from signoff_web.sessions import Session
from signoff_web.settings import WebSettings
from signoff_web.tables import sessions as table

_NO_SESSION_NEEDED = ("/static/", "/healthz", "/metrics")


async def start(engine: AsyncEngine, session: Session) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            table.insert().values(
                id=session.sid,
                user_id=session.user_id,
                organization_id=session.organization_id,
                expires_at=datetime.fromtimestamp(session.exp, UTC),
            )
        )


async def live(engine: AsyncEngine, sid: str) -> bool:
    """Whether the row ``sid`` exists, is not revoked and has not expired (database clock)."""
    if not sid:
        return False
    async with engine.connect() as conn:
        found = await conn.scalar(
            select(table.c.id).where(
                table.c.id == sid,
                table.c.revoked_at.is_(None),
                table.c.expires_at > func.now(),
            )
        )
    return found is not None


async def revoke(engine: AsyncEngine, sid: str) -> bool:
    """End one session; ``False`` if it was not live."""
    return bool(await _revoke(engine, table.c.id == sid))


async def revoke_person(engine: AsyncEngine, user_id: str) -> int:
    """End every live session of a person (removed from a club, a stolen laptop…)."""
    return await _revoke(engine, table.c.user_id == user_id)


async def _revoke(engine: AsyncEngine, which: ColumnElement[bool]) -> int:
    async with engine.begin() as conn:
        result = await conn.execute(
            table.update().where(which, table.c.revoked_at.is_(None)).values(revoked_at=func.now())
        )
    return int(result.rowcount)


async def current(request: Request, settings: WebSettings, engine: AsyncEngine) -> Session | None:
    """The request's live session, or ``None``."""
    secret = settings.web.session_secret.get_secret_value()
    found = sessions.load(request.cookies.get(sessions.COOKIE), secret)
    if found is None:
        return None
    if settings.unsafe.no_session_revocation:  # negative control: the signature is enough
        return found
    return found if await live(engine, found.sid) else None


def install(app: FastAPI, settings: WebSettings, engine: AsyncEngine) -> None:
    @app.middleware("http")
    async def live_session(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path
        if path.startswith(_NO_SESSION_NEEDED):
            request.state.session = None
        else:
            request.state.session = await current(request, settings, engine)
        return await call_next(request)
