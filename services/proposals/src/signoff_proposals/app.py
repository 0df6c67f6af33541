"""Wiring: the FastAPI application whose lifespan runs the consumers and the loops.

One process holds the HTTP API, six AMQP consumers (proposal requests, approval commands,
pause-point requests, outcomes, reconciliation checks, the notifier's proposal events) and six
loops (the outbox relay, the state gauge, the expiry sweep, the stuck-execution sweep, the event
streams' ``LISTEN``, the notifications' delivery loop). At its start it settles the notifier's
bindings (``notifications.bindings``) before it serves. Every
part is safe to run in several replicas: claims are conditional UPDATEs, sweeps and the relay
take rows with ``SKIP LOCKED``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from signoff_contracts.operations import Directory
from signoff_runtime import openapi, retention, unsafe
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.http import install_standard_routes, run_server
from signoff_runtime.members import Members
from signoff_runtime.registry import Operations
from signoff_runtime.relay import OutboxRelay
from signoff_runtime.retention import inbox_rule, outbox_rule
from signoff_runtime.service import Runtime
from signoff_runtime.settings import load as load_settings
from signoff_runtime.tokens import PROPOSALS_AUDIENCE

from signoff_proposals import handlers, sweeps
from signoff_proposals.api import events
from signoff_proposals.api import proposals as proposal_reads
from signoff_proposals.context import Context, load_domain
from signoff_proposals.decisions import routes as decision_routes
from signoff_proposals.lifecycle import metrics as lifecycle_metrics
from signoff_proposals.notifications import bindings as notification_bindings
from signoff_proposals.notifications import delivery as notification_delivery
from signoff_proposals.notifications import routes as notification_routes
from signoff_proposals.outcomes import routes as outcome_routes
from signoff_proposals.pause_points import routes as pause_point_routes
from signoff_proposals.policies import routes as policy_routes
from signoff_proposals.settings import ProposalsSettings
from signoff_proposals.tables import inbox, outbox


def create_app(
    settings: ProposalsSettings | None = None,
    operations: Operations | None = None,
    directory: Directory | None = None,
) -> FastAPI:
    """The service; ``operations``/``directory`` replace the entry points' (in-process tests)."""
    settings = settings or ProposalsSettings()
    runtime = Runtime.build("proposals", settings)
    ops, people = load_domain(settings, operations, directory)
    ctx = Context(
        settings=settings,
        engine=runtime.engine,
        topology=runtime.topology,
        operations=ops,
        directory=people,
        direct=unsafe.direct_publisher(runtime),
    )
    handlers.register(ctx, runtime.broker)
    hub = events.ChangeHub(asyncpg_dsn(settings.db.url), settings.unsafe.events_every_organization)
    keep = settings.retention
    rules = [outbox_rule(outbox, keep), inbox_rule(inbox, keep)]
    pruning = retention.pruning(runtime.engine, rules, keep)
    runtime.loops.extend([*_loops(ctx, runtime), hub.listen, pruning])

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with runtime.running():
            # awaited, not a loop: a stop right after the start never cuts it short mid-way
            retrying = await notification_bindings.settled_or_retrying(ctx)
            try:
                yield
            finally:
                if retrying is not None:
                    retrying.cancel()
                    await asyncio.gather(retrying, return_exceptions=True)

    app = FastAPI(
        title="signoff proposals",
        lifespan=lifespan,
        generate_unique_id_function=openapi.operation_id,
    )
    openapi.describe(app)
    app.state.context = ctx
    Members(settings.auth, people, runtime.engine, PROPOSALS_AUDIENCE).install(app)
    app.state.runtime = runtime
    app.include_router(proposal_reads.router(ctx, hub))
    features = (decision_routes, pause_point_routes, outcome_routes, policy_routes)
    for feature in (*features, notification_routes):
        app.include_router(feature.router(ctx))
    app.include_router(events.router(ctx, hub))
    install_standard_routes(app, {"db": runtime.db_ok, "broker": runtime.broker_ok}, settings)
    return app


def _loops(ctx: Context, runtime: Runtime) -> list[sweeps.Loop]:
    group = ctx.settings.proposals
    relay = OutboxRelay(
        runtime.engine,
        outbox,
        ctx.settings.amqp.url,
        runtime.topology,
        publish_timeout_s=ctx.settings.amqp.publish_timeout_s,
        mark_before_confirm=ctx.settings.unsafe.mark_sent_before_confirm,
    )

    async def outbox_relay() -> None:
        await relay.run()

    async def state_gauge() -> None:
        await lifecycle_metrics.refresh_states(
            runtime.engine, totals_interval_s=ctx.settings.proposals.state_totals_interval_s
        )

    notifier = notification_delivery.Notifier(runtime.engine, ctx.settings.notify)

    return [
        outbox_relay,
        state_gauge,
        notifier.run,
        sweeps.every(
            "expiry_sweep",
            group.expiry_interval_s,
            group.expiry_batch,
            lambda: sweeps.expire_once(ctx),
        ),
        sweeps.every(
            "stuck_sweep",
            group.stuck_interval_s,
            group.stuck_batch,
            lambda: sweeps.republish_once(ctx),
        ),
    ]


def serve() -> None:
    """Run the service on ``SIGNOFF_PROPOSALS__HOST``:``SIGNOFF_PROPOSALS__PORT`` until SIGTERM."""
    settings = load_settings(ProposalsSettings, "proposals")
    # open event streams end only when their reader goes: do not wait for them forever
    run_server(
        create_app(settings),
        settings.proposals.host,
        settings.proposals.port,
        graceful_s=10,
        access_log=False,
    )
