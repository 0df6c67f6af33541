"""The agent service's process: HTTP API, broker and loops, built once from settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI
from signoff_contracts.operations import Directory
from signoff_runtime.http import install_standard_routes
from signoff_runtime.registry import Operations, load_directory, load_operations
from signoff_runtime.service import Runtime

from signoff_agent import propose
from signoff_agent.proposing import Proposer
from signoff_agent.settings import AgentSettings


def create_app(
    settings: AgentSettings | None = None,
    operations: Operations | None = None,
    directory: Directory | None = None,
) -> FastAPI:
    settings = settings or AgentSettings()
    runtime = Runtime.build("agent", settings)
    proposer = Proposer(
        engine=runtime.engine,
        broker=runtime.broker,
        topology=runtime.topology,
        operations=operations or load_operations(),
        directory=directory or load_directory(),
        auth=settings.auth,
        amqp=settings.amqp,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with runtime.running():
            yield

    app = FastAPI(title="signoff agent", version="1", lifespan=lifespan)
    app.state.proposer = proposer
    app.include_router(propose.router)
    install_standard_routes(app, {"database": runtime.db_ok, "broker": runtime.broker_ok})
    return app


def serve() -> None:
    settings = AgentSettings()
    uvicorn.run(
        create_app(settings),
        host=settings.agent.host,
        port=settings.agent.port,
        log_config=None,
        timeout_graceful_shutdown=30,
    )
