"""A running signoff for each end-to-end test module (its own queue prefix, the test database)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

sys.path.insert(0, str(Path(__file__).parent))  # e2e_stack: a module name no other suite uses

from e2e_stack import Stack, delete_topology, new_prefix, stack_env

pytestmark = pytest.mark.e2e


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    request: pytest.FixtureRequest,
    database_url: str,
    amqp_url: str,
    engine: AsyncEngine,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    prefix = new_prefix()
    topology = Topology(prefix, delivery_limit=3)
    log_dir: Path = tmp_path_factory.mktemp(f"logs-{prefix}")
    running = Stack(
        engine=engine,
        amqp_url=amqp_url,
        topology=topology,
        # a module may add to every process's environment (``def extra_stack_env()``)
        env=stack_env(database_url, amqp_url, prefix)
        | getattr(request.module, "extra_stack_env", dict)(),
        log_dir=log_dir,
    )
    try:
        running.start()
        yield running
    finally:
        running.stop()
        await running.http.aclose()
        await delete_topology(amqp_url, topology)
