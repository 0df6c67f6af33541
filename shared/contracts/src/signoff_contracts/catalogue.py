"""The operations catalogue's entry (``GET /v1/operations``): what a client needs to propose.

One model for the agent service that serves it and the clients that read it (signoff-client,
the MCP server, the framework adapters).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class OperationInfo(BaseModel):
    """One operation the caller may propose."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: str
    version: int
    section: str
    resource: str
    effect: Literal["local", "external"]
    title: dict[str, str]
    description: dict[str, str]
    #: the strict JSON Schema of the operation's ``Request`` (the propose body's ``request``)
    request_schema: dict[str, Any]
    #: where to propose it (``POST``)
    propose_path: str = ""


class Catalogue(BaseModel):
    items: list[OperationInfo]
