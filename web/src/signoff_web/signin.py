"""Signing in and out: the directory checks the password, the web starts and ends sessions.

- ``POST /signin`` asks the ``signoff.directory`` entry point's ``authenticate``
  (``signoff_contracts.operations.SignIn``; it hashes in a worker thread, never on the event
  loop). Attempts are rate-limited per address (every
  attempt counts) and per account (failures count, whatever the address): beyond either, the
  page answers ``429`` with ``Retry-After`` and says so in the person's language. A success
  stores the session's row (``session_store``) and sets the cookie naming it.
- ``POST /signout`` revokes that row, so the cookie — or any copy of it — is no longer a session.

The limits are per process (as every rate in signoff): they stop one process being used to
guess passwords quickly, not a distributed attack on many replicas.
"""

from __future__ import annotations

import math

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from signoff_contracts.operations import Locale, Membership, SignIn
from signoff_runtime.limits import TokenBuckets

from signoff_web import session_store, sessions
from signoff_web.context import render, session, settings
from signoff_web.settings import WebGroup

router = APIRouter()


class SignInLimits:
    """How long (seconds) before this address, or this account, may try again; 0: now."""

    def __init__(self, group: WebGroup) -> None:
        self.addresses = TokenBuckets(group.signin_per_minute_per_address)
        self.accounts = TokenBuckets(group.signin_failures_per_minute_per_account)

    def attempt(self, address: str, account: str) -> float:
        # an account's bucket is only looked at here; a failure takes from it (``failed``)
        return self.addresses.take(address) or self.accounts.peek(account)

    def failed(self, account: str) -> None:
        self.accounts.take(account)


def _locale(request: Request) -> Locale:
    """Nobody is signed in yet: the browser's first language we speak, else English."""
    for part in request.headers.get("accept-language", "").split(","):
        if part.strip().lower().startswith("fr"):
            return "fr"
        if part.strip().lower().startswith("en"):
            return "en"
    return "en"


@router.get("/signin", response_class=HTMLResponse)
async def signin_page(request: Request) -> Response:
    return render(request, "signin.html", None, error=False, locale=_locale(request))


@router.post("/signin")
async def signin(request: Request, email: str = Form(...), password: str = Form(...)) -> Response:
    # sign-in has no session yet; SameSite=Lax and the origin check stop cross-site posts
    origin = request.headers.get("origin")
    if origin and origin.rstrip("/") != str(request.base_url).rstrip("/"):
        raise HTTPException(403, "cross-site sign-in")
    account = email.strip().lower()[:320]
    limits: SignInLimits = request.app.state.signin_limits
    address = request.client.host if request.client else "unknown"
    wait = (
        0.0 if settings(request).unsafe.no_signin_rate_limit else limits.attempt(address, account)
    )
    if wait > 0:
        seconds = max(1, math.ceil(wait))
        response = render(
            request,
            "signin.html",
            None,
            status_code=429,
            error="rate_limited",
            seconds=seconds,
            locale=_locale(request),
        )
        response.headers["Retry-After"] = str(seconds)
        return response
    directory: SignIn = request.app.state.directory
    async with request.app.state.runtime.engine.begin() as conn:  # begin: an old hash is upgraded
        member = await directory.authenticate(conn, account, password[:1024])
    if member is None:
        limits.failed(account)
        return render(
            request, "signin.html", None, status_code=401, error=True, locale=_locale(request)
        )
    return await _start(request, member)


async def _start(request: Request, member: Membership) -> Response:
    s = settings(request).web
    started = sessions.Session.start(member, s.session_ttl_s)
    await session_store.start(request.app.state.runtime.engine, started)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        sessions.COOKIE,
        sessions.dump(started, s.session_secret.get_secret_value()),
        max_age=s.session_ttl_s,
        httponly=True,
        samesite="lax",
        secure=bool(s.secure_cookies),
        path="/",
    )
    return response


@router.post("/signout")
async def signout(request: Request, csrf: str = Form("")) -> Response:
    who = session(request)
    if not sessions.csrf_ok(who, csrf):
        raise HTTPException(403, "csrf")
    await session_store.revoke(request.app.state.runtime.engine, who.sid)
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(sessions.COOKIE, path="/")
    return response
