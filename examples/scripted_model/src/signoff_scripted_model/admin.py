"""Test-only controls: read the request log, force a script, inject faults, start over.

Mounted only when ``allow_admin`` is true (the default: this is a test double). A real
endpoint has none of this, so the agent may not depend on it — only tests do.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from signoff_scripted_model.errors import openai_error
from signoff_scripted_model.faults import FaultRule
from signoff_scripted_model.registry import UnknownScript
from signoff_scripted_model.routes import Server
from signoff_scripted_model.server import ModelServer

router = APIRouter(prefix="/_admin")


class ForceScript(BaseModel):
    """The body of ``POST /_admin/script``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    script: str | None = Field(description="Answer every request with this script; null = stop.")


@router.get("/requests")
async def requests(server: Server) -> dict[str, Any]:
    """Every chat-completion request since the last reset, oldest first.

    Each item: ``seq``, ``body`` (as received), ``stream``, ``fault``, ``script``,
    ``status`` and ``response`` (finish_reason, text, tool_calls with their ids).
    """
    return {"items": server.requests, "next_cursor": None}


@router.post("/reset")
async def reset(server: Server) -> dict[str, str]:
    """Forget requests, faults and the forced script."""
    server.reset()
    return {"status": "reset"}


@router.post("/faults")
async def set_faults(rule: FaultRule, server: Server) -> dict[str, Any]:
    """Replace the fault plan; ``{"mode": null}`` clears it."""
    server.set_faults(rule)
    return server.faults.describe()


@router.get("/faults")
async def read_faults(server: Server) -> dict[str, Any]:
    """The rule, strikes left (null = unlimited) and strikes so far."""
    return server.faults.describe()


@router.post("/script", response_model=None)
async def force_script(command: ForceScript, server: Server) -> dict[str, Any] | JSONResponse:
    """Force one script for all requests, or go back to per-request selection."""
    try:
        server.force(command.script)
    except UnknownScript as exc:
        return openai_error(404, str(exc), "invalid_request_error", code="unknown_script")
    return _scripts(server)


@router.get("/script")
async def read_script(server: Server) -> dict[str, Any]:
    """The forced script, the default, and what is installed."""
    return _scripts(server)


def _scripts(server: ModelServer) -> dict[str, Any]:
    return {
        "override": server.override,
        "default": server.default_script,
        "available": server.registry.names(),
        "broken": server.registry.broken(),
    }
