"""RFC 9457 problem documents for every HTTP error, and nothing internal in any of them.

Handlers raise ``Problem``; validation errors become ``422 invalid_request`` listing the fields
at fault (locations and messages only, never the submitted values); anything unexpected becomes
``500 internal_error`` carrying only a correlation id, and the detail goes to the log. A
database that is momentarily out of reach (pool exhausted, statement timeout, connection lost,
server restarting) is not a bug: it becomes ``503 temporarily_unavailable`` with ``Retry-After``,
so a client knows to try again.
"""

from __future__ import annotations

from typing import Any, cast

import structlog
from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.ids import new_id
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from signoff_runtime.apps import is_fastapi
from signoff_runtime.transient import is_transient
from signoff_runtime.validation import HasErrors, problem_errors

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


class ProblemDocument(BaseModel):
    """What every error answer holds (``application/problem+json``), for the OpenAPI documents.

    Members beyond these say more about one kind of problem (``errors``, ``reason``,
    ``correlation_id``, ``retry_after_s`` ...).
    """

    model_config = ConfigDict(extra="allow", title="Problem")

    type: str = Field(description="`urn:signoff:problem:<code>`.")
    title: str
    status: int
    code: str = Field(description="What went wrong, for programs: stable, snake_case.")
    detail: str | None = None


_DESCRIPTIONS = {
    400: "The request is malformed.",
    401: "No valid bearer token.",
    403: "The caller may not do this.",
    404: "No such resource in the caller's organization.",
    409: "The resource's state does not allow it now.",
    422: "The request is not valid.",
    429: "Too many requests; try again later.",
    503: "Temporarily unavailable; try again (see Retry-After).",
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each status answered with a problem document."""
    return {
        status: {
            "description": _DESCRIPTIONS.get(status, "A problem."),
            "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


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


def install(app: Starlette) -> None:
    """Every error the app answers as a problem document; a FastAPI app's failed request
    validation too. A plain Starlette app (the executor's and the reconciler's probes) validates
    nothing, and FastAPI is not imported for it."""
    app.add_exception_handler(Problem, _problem)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
    if is_fastapi(app):
        from fastapi.exceptions import RequestValidationError

        app.add_exception_handler(RequestValidationError, _invalid)


async def _problem(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return problem_response(exc)


async def _invalid(_: Request, exc: Exception) -> Response:
    errors = problem_errors(cast("HasErrors", exc))
    return problem_response(
        Problem(422, "invalid_request", "The request is not valid.", errors=errors)
    )


async def _http(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _STATUS_CODES.get(exc.status_code, "http_error")
    return problem_response(Problem(exc.status_code, code, str(exc.detail)))


async def _unexpected(request: Request, exc: Exception) -> Response:
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
    log.error("http.unhandled", path=request.url.path, correlation_id=correlation_id, exc_info=exc)
    return problem_response(
        Problem(
            500,
            "internal_error",
            "Something went wrong on our side.",
            correlation_id=correlation_id,
        )
    )
