"""The executor process: a Starlette app (``/healthz`` and ``/metrics``; no API, so no FastAPI)
whose lifespan runs the contract consumer and the outbox relay.

Stopping (SIGTERM → uvicorn shutdown → lifespan exit → ``Runtime.running`` exit) stops consuming,
gives in-flight contracts ``SIGNOFF_EXECUTOR__GRACEFUL_TIMEOUT_S`` to commit and ack, then stops the
relay and closes the providers. A contract cut off anyway stays unacknowledged and is redelivered;
its ``executions`` row says what happened to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import structlog
from signoff_contracts.operations import Directory, check_operation
from signoff_runtime import retention, unsafe
from signoff_runtime.http import install_standard_routes, run_server
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations, load_directory, load_operations
from signoff_runtime.relay import OutboxRelay
from signoff_runtime.retention import outbox_rule
from signoff_runtime.service import Runtime
from signoff_runtime.settings import load as load_settings
from starlette.applications import Starlette

from signoff_executor import handlers, tables
from signoff_executor.execution import Executor
from signoff_executor.settings import ExecutorSettings

log = structlog.get_logger(__name__)


def create_app(
    settings: ExecutorSettings,
    operations: Operations | None = None,
    directory: Directory | None = None,
) -> Starlette:
    """Wire the executor; ``operations`` and ``directory`` default to the ``signoff.operations``
    and ``signoff.directory`` entry points (the directory re-checks each approver)."""
    ops = operations if operations is not None else load_operations()
    for op in ops:
        check_operation(type(op))
    runtime = Runtime.build(
        "executor", settings, graceful_timeout_s=settings.executor.graceful_timeout_s
    )
    providers = Providers()
    executor = Executor(
        engine=runtime.engine,
        topology=runtime.topology,
        operations=ops,
        directory=directory if directory is not None else load_directory(),
        verifying=settings.contracts,
        providers=providers,
        perform_timeout_s=settings.executor.perform_timeout_s,
        no_dedup=settings.unsafe.no_dedup,
        direct=unsafe.direct_publisher(runtime),
        skip_authz=settings.unsafe.skip_execution_authz,
    )
    handlers.register(runtime, executor, prefetch=settings.executor.concurrency)
    relay = OutboxRelay(
        runtime.engine,
        tables.outbox,
        settings.amqp.url,
        runtime.topology,
        publish_timeout_s=settings.amqp.publish_timeout_s,
        mark_before_confirm=settings.unsafe.mark_sent_before_confirm,
    )
    keep = settings.retention
    runtime.loops.extend(
        [relay.run, retention.pruning(runtime.engine, [outbox_rule(tables.outbox, keep)], keep)]
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await providers.open(stack, ops)
            async with runtime.running():
                log.info(
                    "executor.ready",
                    operations=[f"{k} v{v}" for k, v in ops.versions()],
                    concurrency=settings.executor.concurrency,
                    pool_size=settings.db.pool_size,
                )
                yield

    app = Starlette(lifespan=lifespan)
    install_standard_routes(app, {"database": runtime.db_ok, "broker": runtime.broker_ok})
    app.state.runtime = runtime
    app.state.executor = executor
    return app


def serve(operations: Operations | None = None, directory: Directory | None = None) -> None:
    """Run the executor until SIGTERM/SIGINT (entry point ``signoff.services: executor``)."""
    settings = load_settings(ExecutorSettings, "executor")
    app = create_app(settings, operations, directory)
    run_server(app, settings.executor.host, settings.executor.port, graceful_s=5, lifespan="on")
