"""Fixtures for the proposals service's tests.

- ``settings``: the service's settings pointed at this test's database and queue prefix;
- ``service``: the service in-process (its consumers and loops running) with a ``Harness``;
- ``service_process``: the service as its own process (``python -m signoff_proposals``), the
  kit's toy domain plugged in by ``SIGNOFF_PROPOSALS__TEST_PLUGIN``, healthy before the test
  starts and stopped with SIGTERM after it;
- ``amqp``: a connected client broker (for tests without a service).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from faststream.rabbit import RabbitBroker
from signoff_proposals.app import create_app
from signoff_proposals.settings import ProposalsGroup, ProposalsSettings
from signoff_runtime.settings import AmqpSettings, DatabaseSettings, broker_user
from signoff_runtime.testing.processes import ServiceProcess, free_port
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

SUPPORT = Path(__file__).parent / "support"
sys.path.insert(0, str(SUPPORT))

from proposals_testkit import Harness, forget_unsent_outbox  # noqa: E402
from proposals_toy import build  # noqa: E402
from signoff_conformance.toy.domain import create_schema  # noqa: E402


class _Process(ServiceProcess):
    """``ServiceProcess`` that closes its copy of the log file once the child has it (the
    shared one leaves it to the garbage collector: a ResourceWarning, an error here)."""

    def start(self) -> _Process:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def toy_schema(engine: AsyncEngine) -> None:
    """The toy domain's tables: its accounts and its members (the directory)."""
    await create_schema(engine)


@pytest.fixture
def settings(database_url: str, amqp_url: str, topology: Topology) -> ProposalsSettings:
    return ProposalsSettings(
        env="test",
        db=DatabaseSettings(url=database_url, pool_size=20),
        amqp=AmqpSettings(
            url=amqp_url, prefix=topology.prefix, delivery_limit=topology.delivery_limit
        ),
        # the stuck sweep stays out of the way unless a test asks for it
        proposals=ProposalsGroup(expiry_interval_s=0.2, stuck_after_s=3600, stuck_interval_s=0.2),
    )


@pytest_asyncio.fixture(loop_scope="session")
async def amqp(amqp_url: str) -> AsyncIterator[RabbitBroker]:
    async with RabbitBroker(amqp_url, log_level=logging.DEBUG) as broker:
        yield broker


@pytest_asyncio.fixture(loop_scope="session")
async def service(
    settings: ProposalsSettings,
    engine: AsyncEngine,
    toy_schema: None,
    amqp: RabbitBroker,
    topology: Topology,
) -> AsyncIterator[Harness]:
    await forget_unsent_outbox(engine)
    operations, directory = build()
    app = create_app(settings, operations, directory)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proposals") as http:
            yield Harness(
                engine, amqp, topology, http, settings.auth, broker_user(settings.amqp.url)
            )


@pytest_asyncio.fixture(loop_scope="session")
async def service_process(
    settings_env: dict[str, str],
    engine: AsyncEngine,
    toy_schema: None,
    amqp: RabbitBroker,
    topology: Topology,
    settings: ProposalsSettings,
    tmp_path: Path,
) -> AsyncIterator[Harness]:
    await forget_unsent_outbox(engine)
    port = free_port()
    env = {
        **settings_env,
        "SIGNOFF_PROPOSALS__PORT": str(port),
        "SIGNOFF_PROPOSALS__TEST_PLUGIN": "proposals_toy:build",
        "SIGNOFF_PROPOSALS__STUCK_AFTER_S": "3600",
        # the event stream's keep-alive and membership re-check, short enough to be seen
        "SIGNOFF_PROPOSALS__STREAM_KEEPALIVE_S": "1",
        "SIGNOFF_PROPOSALS__STREAM_RECHECK_S": "1",
        "SIGNOFF_PROPOSALS__STREAM_MAX_PER_PERSON": "2",
        "SIGNOFF_DB__POOL_SIZE": "20",
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
    }
    process = _Process(
        "proposals", [sys.executable, "-m", "signoff_proposals"], env, port, tmp_path
    )
    process.start()
    try:
        await asyncio.to_thread(process.wait_healthy, 30.0)
        async with httpx.AsyncClient(base_url=process.url, timeout=30.0) as http:
            yield Harness(
                engine, amqp, topology, http, settings.auth, broker_user(settings.amqp.url)
            )
    finally:
        code = await asyncio.to_thread(process.stop)
        # uvicorn re-raises SIGTERM once it has shut down gracefully: -15 is a clean stop
        assert code in (0, -signal.SIGTERM), f"proposals exited with {code}:\n{process.tail()}"
        assert "service.stopped" in process.tail(), process.tail()
