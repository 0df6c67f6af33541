"""Builds the scripted model server's ASGI app from its settings.

Served for real by ``python -m signoff_scripted_model``. Routes:

=============================  ===============================================
``POST /v1/chat/completions``  one assistant turn, whole or ``stream: true``
``GET /v1/models[/{id}]``      ``scripted:<name>`` per installed script
``GET /healthz``               liveness
``GET /_admin/requests``       every completion request, in order  (admin)
``POST /_admin/reset``         forget requests, faults, forced script (admin)
``POST|GET /_admin/faults``    inject / read faults (faults.py)      (admin)
``POST|GET /_admin/script``    force a script for all requests        (admin)
=============================  ===============================================
"""

from __future__ import annotations

from fastapi import FastAPI

from signoff_scripted_model import admin, routes
from signoff_scripted_model.errors import install_error_handlers
from signoff_scripted_model.registry import ScriptRegistry
from signoff_scripted_model.server import ModelServer
from signoff_scripted_model.settings import Settings


def create_app(settings: Settings, registry: ScriptRegistry | None = None) -> FastAPI:
    """One app, one server state; admin routes only when ``settings.allow_admin``."""
    app = FastAPI(
        title="signoff scripted model",
        summary="An OpenAI-compatible chat-completions endpoint answered by scripts.",
        version="0.1.0",
    )
    app.state.server = ModelServer(registry or ScriptRegistry.discover(), settings.script)
    install_error_handlers(app)
    app.include_router(routes.router)
    if settings.allow_admin:
        app.include_router(admin.router)
    return app
