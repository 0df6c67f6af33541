"""The insider suite: each service's credentials as deployed, against a running stack.

``separated_stack`` runs every process as deployed: its own role's broker user (the production
permissions, ``e2e_broker_users``) with ``SIGNOFF_AMQP__USERS`` naming every role's user, its own
database role, and only the keys it needs, made for this stack (``StackKeys``: the web alone
holds the token private key, the proposals service alone the contract signing key).
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
sys.path.insert(0, str(Path(__file__).parent))  # insider_kit

import e2e_broker_users
from e2e_stack import Stack, declare_topology, delete_topology, new_prefix
from signoff_runtime.testing.processes import stack_env


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def separated_stack(
    database_url: str,
    amqp_url: str,
    engine: AsyncEngine,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    e2e_broker_users.require()
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
        own_keys=True,
    )
    try:
        await asyncio.to_thread(running.start)
        yield running
    finally:
        running.stop()
        await running.http.aclose()
        await delete_topology(amqp_url, topology)
