"""The insider suite: each service's credentials as deployed, against a running stack.

``separated_stack`` runs every process with its own role's broker user (the production
permissions, ``e2e_broker_users``) and ``SIGNOFF_AMQP__USERS`` naming every role's user.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

sys.path.insert(0, str(Path(__file__).parents[2] / "e2e"))  # e2e_stack, e2e_broker_users

import e2e_broker_users
from e2e_stack import Stack, declare_topology, delete_topology, new_prefix, stack_env


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def separated_stack(
    database_url: str,
    amqp_url: str,
    engine: AsyncEngine,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    if not e2e_broker_users.available():
        pytest.skip("needs rabbitmqctl to create the per-role broker users")
    await asyncio.to_thread(e2e_broker_users.ensure)
    prefix = new_prefix()
    topology = Topology(prefix, delivery_limit=3)
    await declare_topology(amqp_url, topology)  # as the broker's definitions would
    running = Stack(
        engine=engine,
        amqp_url=amqp_url,
        topology=topology,
        env=stack_env(database_url, amqp_url, prefix),
        log_dir=tmp_path_factory.mktemp(f"logs-{prefix}"),
        separate_users=True,
    )
    try:
        await asyncio.to_thread(running.start)
        yield running
    finally:
        running.stop()
        await running.http.aclose()
        await delete_topology(amqp_url, topology)
