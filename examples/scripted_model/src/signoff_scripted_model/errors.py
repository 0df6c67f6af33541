"""Errors in OpenAI's own shape, ``{"error": {"message", "type", "param", "code"}}``.

The house rule is RFC 9457 problem documents, but this server stands in for OpenAI: its
clients are the openai SDK and code written against the real API, which read
``error.message`` / ``error.code`` and branch on the status (400 BadRequestError, 404
NotFoundError, 429 RateLimitError, 5xx InternalServerError). So every error here, admin
routes included, has that shape — never a stack trace.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

log = structlog.get_logger(__name__)


def openai_error(
    status: int,
    message: str,
    type_: str,
    *,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """One error response."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _on_invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    param = ".".join(str(part) for part in first["loc"] if part != "body") or None
    return openai_error(
        400, f"Invalid request: {first['msg']}", "invalid_request_error", param=param
    )


async def _on_http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return openai_error(exc.status_code, str(exc.detail), "invalid_request_error")


async def _on_crash(_: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled_error", error=f"{type(exc).__name__}: {exc}")
    return openai_error(500, "The scripted model server failed.", "server_error")


def install_error_handlers(app: FastAPI) -> None:
    """Every error as an OpenAI error object."""
    app.add_exception_handler(RequestValidationError, _on_invalid)
    app.add_exception_handler(HTTPException, _on_http)
    app.add_exception_handler(Exception, _on_crash)
