"""The OpenAPI documents a generated client can use as they are.

FastAPI describes what the routes declare; three things it cannot know are added here, once
for every API: operation ids are the routes' own names (``approve_proposal``, not
``approve_v1_proposals__proposal_id__approve_post``); every operation but the public probes
needs a bearer token — the ``bearer`` HTTP security scheme replaces the ``Authorization``
header parameter the routes read it from (who is authenticated does not change: the routes
still check the token themselves and answer ``401`` with a problem document); and every error
is a problem document, ``422`` included (FastAPI's own validation-error shape is never sent).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

from signoff_runtime.problems import ProblemDocument, responses

#: routes anyone may call (probes and metrics; most are left out of the documents anyway)
PUBLIC = frozenset({"/healthz", "/livez", "/readyz", "/metrics"})

SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "bearerFormat": "JWT",
    "description": "A person's signoff token for this service's audience (`signoff token`).",
}


def operation_id(route: APIRoute) -> str:
    """``generate_unique_id_function``: the route's name (a test keeps them snake_case)."""
    return route.name


def event_stream(description: str) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route that answers with server-sent events."""
    return {
        200: {
            "description": description,
            "content": {
                "text/event-stream": {
                    "schema": {"type": "string", "description": "Server-sent events."}
                }
            },
        }
    }


def ok(model: type[BaseModel], *problems: int, status: int = 200) -> dict[str, Any]:
    """A route's decorator arguments: its 2xx body is ``model`` — documented, while the route
    still sends the body it builds (``response_model=None``) — and its problem answers."""
    return {
        "response_model": None,
        "responses": {status: {"model": model, "description": "OK"}} | responses(*problems),
    }


def describe(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the completed document (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            complete(FastAPI.openapi(app))  # FastAPI's own document, which it keeps
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def complete(document: dict[str, Any]) -> None:
    components = document.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = SCHEME
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = ProblemDocument.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for path, operations in document.get("paths", {}).items():
        for operation in operations.values():
            answers = operation.setdefault("responses", {})
            if "422" in answers:
                answers["422"] = responses(422)[422]
            if path in PUBLIC:
                continue
            operation["security"] = [{"bearer": []}]
            kept = [
                p
                for p in operation.get("parameters", ())
                if not (p.get("in") == "header" and p.get("name", "").lower() == "authorization")
            ]
            if kept:
                operation["parameters"] = kept
            else:
                operation.pop("parameters", None)
            answers.setdefault("401", responses(401)[401])
