"""Every error the simulator answers is an RFC 9457 problem document, never a stack trace.

Clients branch on ``code`` (stable, snake_case), people read ``title`` and ``detail``.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

PROBLEM_JSON = "application/problem+json"
_TYPE_PREFIX = "urn:signoff:card-provider:problem:"

log = structlog.get_logger(__name__)


class Problem(Exception):
    """Raised by routes to answer with a problem document."""

    def __init__(self, status: int, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.extra = extra


def problem_response(
    status: int, code: str, detail: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """Render one problem document."""
    body = {
        "type": _TYPE_PREFIX + code,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


async def _on_problem(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return problem_response(exc.status, exc.code, exc.detail, **exc.extra)


async def _on_invalid(_: Request, exc: Exception) -> JSONResponse:
    """422 ``invalid_request`` listing where and why, without echoing the input back."""
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": ".".join(str(part) for part in error["loc"]), "msg": str(error["msg"])}
        for error in exc.errors()
    ]
    detail = "; ".join(f"{error['loc']}: {error['msg']}" for error in errors)
    return problem_response(422, "invalid_request", detail, errors=errors)


async def _on_http(_: Request, exc: Exception) -> JSONResponse:
    """Starlette's own 404/405 and friends, reshaped."""
    assert isinstance(exc, HTTPException)
    code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
    return problem_response(exc.status_code, code, str(exc.detail), headers=exc.headers)


async def _on_crash(request: Request, exc: Exception) -> JSONResponse:
    """A bug in the simulator: log it here, tell the caller nothing about the insides."""
    log.error("request.crashed", path=request.url.path, error=repr(exc))
    return problem_response(500, "internal_error", "The simulator failed; see its log.")


def install_problem_handlers(app: FastAPI) -> None:
    """Route every error path of ``app`` through a problem document."""
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_invalid)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(Exception, _on_crash)
