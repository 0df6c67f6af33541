"""What a person sees when something fails: what it means for them, in their language.

An API's problem document ``code`` (or, without one, its status) is translated (``texts.problem``):
not found, not allowed, expired, the service unavailable — try again. Every error page shows a
reference — the request's trace id, which is on every log line the request wrote here and, as
the ``traceparent`` the web sends on, in the agent's and the proposals service's logs too.
"""

from __future__ import annotations

import httpx
import structlog
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from signoff_runtime import tracing
from starlette.exceptions import HTTPException

from signoff_web import texts
from signoff_web.apis import ApiError
from signoff_web.context import SignInRequired, render, session
from signoff_web.sessions import Session

log = structlog.get_logger(__name__)
#: fragments and streams a script reads: a redirect to the sign-in page means nothing to them
_SCRIPTED = ("/live", "/events")


class SectionNotServed(Exception):
    """A page names a section the agent does not serve."""


def reference() -> str:
    return tracing.trace_id(tracing.current()) or ""


def problem_page(request: Request, status: int, code: str) -> Response:
    try:
        who: Session | None = session(request)
    except SignInRequired:
        who = None
    ref = reference()
    log.warning("web.problem", status=status, code=code, path=request.url.path, reference=ref)
    locale = who.locale if who else "en"
    return render(
        request,
        "error.html",
        who,
        status_code=status,
        message=texts.problem(code, locale),
        reference=ref,
    )


def install_errors(app: FastAPI) -> None:
    @app.exception_handler(SignInRequired)
    async def _signin(request: Request, _: SignInRequired) -> Response:
        if request.method == "GET" and not request.url.path.endswith(_SCRIPTED):
            return RedirectResponse("/signin", status_code=303)
        return HTMLResponse("sign in", status_code=401)

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> Response:
        status = exc.status if exc.status in (401, 403, 404, 409, 429) else 502
        if exc.status in (502, 503, 504):
            status = 503
        code = exc.code if exc.code != "error" else str(exc.status)
        return problem_page(request, status, code)

    @app.exception_handler(httpx.HTTPError)
    async def _unreachable(request: Request, exc: httpx.HTTPError) -> Response:
        log.warning("web.api_unreachable", error=type(exc).__name__)
        return problem_page(request, 503, "unavailable")

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        """The web's own refusals (a missing CSRF token, an unknown page) as pages too."""
        code = exc.detail if exc.detail in texts.PROBLEM_OF else str(exc.status_code)
        return problem_page(request, exc.status_code, code)

    @app.exception_handler(SectionNotServed)
    async def _section(request: Request, _: SectionNotServed) -> Response:
        return problem_page(request, 404, "unknown_section")
