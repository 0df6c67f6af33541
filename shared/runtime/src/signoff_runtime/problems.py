"""RFC 9457 problem documents for every HTTP error, and nothing internal in any of them.

Handlers raise ``Problem``; validation errors become ``422 invalid_request`` listing the fields
at fault (locations and messages only, never the submitted values); anything unexpected becomes
``500 internal_error`` carrying only a correlation id, and the detail goes to the log. A
database that is momentarily out of reach (pool exhausted, statement timeout, connection lost,
server restarting) is not a bug: it becomes ``503 temporarily_unavailable`` with ``Retry-After``,
so a client knows to try again.
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from signoff_contracts.ids import new_id
from starlette.exceptions import HTTPException as StarletteHTTPException

from signoff_runtime.transient import is_transient
from signoff_runtime.validation import problem_errors

log = structlog.get_logger(__name__)
MEDIA_TYPE = "application/problem+json"


class Problem(Exception):
    def __init__(
        self, status: int, code: str, title: str, detail: str | None = None, **extra: Any
    ) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.extra = extra

    def body(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": f"urn:signoff:problem:{self.code}",
            "title": self.title,
            "status": self.status,
            "code": self.code,
        }
        if self.detail:
            doc["detail"] = self.detail
        doc.update(self.extra)
        return doc


def problem_response(problem: Problem) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if problem.status == 401 else None
    if problem.status == 503:
        headers = {"Retry-After": "1"}
    return JSONResponse(
        problem.body(), status_code=problem.status, media_type=MEDIA_TYPE, headers=headers
    )


_STATUS_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def install(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(_: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = problem_errors(exc)
        return problem_response(
            Problem(422, "invalid_request", "The request is not valid.", errors=errors)
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, "http_error")
        return problem_response(Problem(exc.status_code, code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        correlation_id = new_id("cor")
        if is_transient(exc):
            log.warning(
                "http.database_unavailable",
                path=request.url.path,
                correlation_id=correlation_id,
                error=type(exc).__name__,
            )
            return problem_response(
                Problem(
                    503,
                    "temporarily_unavailable",
                    "The service is busy or restarting; try again shortly.",
                    correlation_id=correlation_id,
                )
            )
        log.error(
            "http.unhandled", path=request.url.path, correlation_id=correlation_id, exc_info=exc
        )
        return problem_response(
            Problem(
                500,
                "internal_error",
                "Something went wrong on our side.",
                correlation_id=correlation_id,
            )
        )
