"""The reconciler process: ``/healthz`` and ``/metrics`` (a Starlette app: no API, so no
FastAPI), the request consumer, the check loop (with its stranded-attempt scan), the dead-letter
archive consumers and the outbox relay, all run by ``Runtime.running`` inside the app's
lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from signoff_contracts.operations import check_operation
from signoff_runtime import retention
from signoff_runtime.http import install_standard_routes, run_server
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations, load_operations
from signoff_runtime.relay import OutboxRelay
from signoff_runtime.retention import inbox_rule, outbox_rule
from signoff_runtime.service import Runtime
from signoff_runtime.settings import load as load_settings
from starlette.applications import Starlette

from signoff_reconciler import handlers, tables
from signoff_reconciler.checks import Checker
from signoff_reconciler.dead_letters import handlers as dead_letter_handlers
from signoff_reconciler.settings import ReconcilerSettings


def create_app(settings: ReconcilerSettings, operations: Operations | None = None) -> Starlette:
    """Wire the reconciler; ``operations`` defaults to the ``signoff.operations`` entry points."""
    ops = operations if operations is not None else load_operations()
    for op in ops:
        check_operation(type(op))
    group = settings.reconciler
    runtime = Runtime.build("reconciler", settings, graceful_timeout_s=group.graceful_timeout_s)
    providers = Providers()
    checker = Checker(
        engine=runtime.engine,
        topology=runtime.topology,
        operations=ops,
        providers=providers,
        settings=group,
    )
    handlers.register(runtime, ops, checker, prefetch=group.prefetch)
    if group.archive_dead_letters:
        dead_letter_handlers.register(runtime, prefetch=group.dead_letter_prefetch)
    relay = OutboxRelay(
        runtime.engine,
        tables.outbox,
        settings.amqp.url,
        runtime.topology,
        publish_timeout_s=settings.amqp.publish_timeout_s,
        mark_before_confirm=settings.unsafe.mark_sent_before_confirm,
    )
    keep = settings.retention
    rules = [outbox_rule(tables.outbox, keep), inbox_rule(tables.inbox, keep)]
    runtime.loops.extend([checker.run, relay.run, retention.pruning(runtime.engine, rules, keep)])

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await providers.open(stack, ops)
            async with runtime.running():
                yield

    app = Starlette(lifespan=lifespan)
    install_standard_routes(app, {"database": runtime.db_ok, "broker": runtime.broker_ok})
    app.state.runtime = runtime
    app.state.checker = checker
    return app


def serve(operations: Operations | None = None) -> None:
    """Run the reconciler until SIGTERM/SIGINT (entry point ``signoff.services: reconciler``)."""
    settings = load_settings(ReconcilerSettings, "reconciler")
    app = create_app(settings, operations)
    run_server(app, settings.reconciler.host, settings.reconciler.port, graceful_s=5, lifespan="on")
