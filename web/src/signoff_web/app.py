"""The web service's process: pages, a requester for approval commands, HTTP clients.

The web owns one table, its sessions (schema ``web``, see ``tables``), so that sign-out ends a
session on the server. It signs people in through the ``signoff.directory`` entry point (its
``authenticate``), reads everything it shows — the sections and resources to start from,
conversations, proposals, pause points — from the agent's and the proposals service's HTTP APIs
with the person's own short-lived token, and sends decisions as AMQP request-reply commands. It
imports no domain: operations come by entry point, as in every service.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from signoff_contracts.operations import SignIn
from signoff_runtime.http import install_standard_routes, run_server
from signoff_runtime.registry import Operations, load_directory, load_operations
from signoff_runtime.rpc import Requester
from signoff_runtime.service import Runtime
from signoff_runtime.settings import load as load_settings

from signoff_web import actions, errors, leaving, live, pages, session_store, signin
from signoff_web.apis import Apis
from signoff_web.commands import Commands
from signoff_web.sections import Catalogue
from signoff_web.settings import WebSettings

HERE = Path(__file__).parent


def create_app(
    settings: WebSettings | None = None,
    operations: Operations | None = None,
    directory: SignIn | None = None,
) -> FastAPI:
    settings = settings or WebSettings()
    found = directory or load_directory()
    if not isinstance(found, SignIn):
        raise RuntimeError("the signoff.directory entry point cannot sign people in (authenticate)")
    runtime = Runtime.build("web", settings)
    http = httpx.AsyncClient(timeout=settings.web.http_timeout_s)
    # one connection per open live page, for as long as it is open: unpooled, and a read
    # deadline a few missed keep-alives long (a silent upstream is reconnected)
    streams = httpx.AsyncClient(
        timeout=httpx.Timeout(settings.web.http_timeout_s, read=settings.web.stream_read_timeout_s),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
    )

    requester = Requester(settings.amqp.url, app_id="signoff-web")

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with requester, runtime.running():
            yield
        await http.aclose()
        await streams.aclose()

    app = FastAPI(title="signoff web", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.runtime = runtime
    app.state.operations = operations or load_operations()
    app.state.directory = found
    app.state.signin_limits = signin.SignInLimits(settings.web)
    app.state.apis = Apis(
        http,
        settings.web.agent_url.rstrip("/"),
        settings.web.proposals_url.rstrip("/"),
        streams=streams,
    )
    app.state.catalogue = Catalogue(app.state.apis, settings.web.sections_cache_s)
    app.state.commands = Commands(requester, runtime.topology, settings.amqp.request_timeout_s)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(signin.router)
    app.include_router(pages.router)
    app.include_router(live.router)
    app.include_router(actions.router)
    app.include_router(leaving.router)
    errors.install_errors(app)
    # inside the body limits (installed next): an oversized body is refused before any lookup
    session_store.install(app, settings, runtime.engine)
    # with the settings: the body limits are SIGNOFF_LIMITS__*, as on every other service
    install_standard_routes(app, {"database": runtime.db_ok, "broker": runtime.broker_ok}, settings)

    @app.middleware("http")
    async def security_headers(request, call_next):  # type: ignore[no-untyped-def]
        response = await call_next(request)
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
            "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        )
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    return app


def serve() -> None:
    settings = load_settings(WebSettings, "web")
    run_server(create_app(settings), settings.web.host, settings.web.port, graceful_s=10)
