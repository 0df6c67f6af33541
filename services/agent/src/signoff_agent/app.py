"""The agent service's process: HTTP API, broker and loops, built once from settings.

One process holds the conversation API and the machine-facing propose endpoint, one AMQP
consumer (proposal and pause-point events for hand-back), and two loops
(the ``LISTEN`` hub of the event streams, the sweep of event-started turns). Replicas are
safe: a turn is a lease on its conversation, events are deduplicated in the inbox, and streams
read the journal, not process memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from signoff_contracts.operations import Directory
from signoff_runtime import openapi, retention
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.http import install_standard_routes, run_server
from signoff_runtime.registry import Operations, load_directory, load_operations
from signoff_runtime.retention import Rule, inbox_rule
from signoff_runtime.rpc import Requester
from signoff_runtime.service import Runtime
from signoff_runtime.settings import load as load_settings

from signoff_agent import (
    catalogue,
    conversation_routes,
    propose_routes,
    section_routes,
    streams,
    tables,
)
from signoff_agent.handlers import Consumers
from signoff_agent.model import ChatModel, build_model
from signoff_agent.pausing import Pauser
from signoff_agent.proposing import Proposer
from signoff_agent.sections import Sections, load_assistants
from signoff_agent.settings import AgentSettings
from signoff_agent.turns import Turns


def create_app(
    settings: AgentSettings | None = None,
    operations: Operations | None = None,
    directory: Directory | None = None,
    model: ChatModel | None = None,
    sections: Sections | None = None,
) -> FastAPI:
    """The service; the optional parts replace the entry points' and the SDK's (tests)."""
    settings = settings or AgentSettings()
    runtime = Runtime.build("agent", settings)
    operations = operations or load_operations()
    directory = directory or load_directory()
    # requests to the proposals service, many in flight at once (``signoff_runtime.rpc``)
    requester = Requester(settings.amqp.url, app_id="signoff-agent")
    proposer = Proposer(
        engine=runtime.engine,
        requester=requester,
        topology=runtime.topology,
        operations=operations,
        directory=directory,
        auth=settings.auth,
        amqp=settings.amqp,
    )
    turns = Turns(
        engine=runtime.engine,
        model=model or build_model(settings.agent),
        sections=sections or load_assistants(operations),
        proposer=proposer,
        pauser=Pauser(requester, runtime.topology, settings.amqp),
        directory=directory,
        group=settings.agent,
    )
    hub = streams.Hub(asyncpg_dsn(settings.db.url))
    Consumers(
        runtime.engine,
        runtime.broker,
        runtime.topology,
        settings.amqp,
        turns,
        senders=runtime.senders,
    ).register()
    keep = settings.retention
    rules = [
        inbox_rule(tables.inbox, keep),
        Rule(tables.journal, "created_at", keep.journal_s),
        Rule(tables.propose_keys, "created_at", keep.propose_keys_s),
    ]
    runtime.loops.extend([hub.listen, turns.sweep, retention.pruning(runtime.engine, rules, keep)])

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with requester, runtime.running():
            yield
            await turns.drain(timeout_s=10.0)

    app = FastAPI(
        title="signoff agent",
        version="1",
        lifespan=lifespan,
        generate_unique_id_function=openapi.operation_id,
    )
    openapi.describe(app)
    app.state.runtime = runtime
    app.state.proposer = proposer
    app.state.conversations = conversation_routes.Conversations(
        engine=runtime.engine,
        auth=settings.auth,
        directory=directory,
        operations=operations,
        sections=turns.sections,
        turns=turns,
        hub=hub,
        group=settings.agent,
    )
    app.include_router(catalogue.router)
    app.include_router(propose_routes.router)
    app.include_router(conversation_routes.router)
    app.include_router(section_routes.router)
    install_standard_routes(app, {"database": runtime.db_ok, "broker": runtime.broker_ok}, settings)
    return app


def serve() -> None:
    settings = load_settings(AgentSettings, "agent")
    run_server(create_app(settings), settings.agent.host, settings.agent.port, graceful_s=30)
