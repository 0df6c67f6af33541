"""Fixtures for the agent's tests: a seeded club, the agent in-process, the fakes around it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from signoff_agent.settings import AgentGroup, AgentSettings
from signoff_club.seed import seed_organization
from signoff_runtime.settings import AmqpSettings, DatabaseSettings
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

sys.path.insert(0, str(Path(__file__).parent / "support"))

from agent_testkit import FakeModel, FakeProposals, running_agent


@pytest.fixture
def settings(database_url: str, amqp_url: str, topology: Topology) -> AgentSettings:
    return AgentSettings(
        env="test",
        db=DatabaseSettings(url=database_url, pool_size=10),
        amqp=AmqpSettings(
            url=amqp_url,
            prefix=topology.prefix,
            delivery_limit=topology.delivery_limit,
            request_timeout_s=5.0,
        ),
        agent=AgentGroup(turn_sweep_s=0.3, stream_keepalive_s=0.5),
    )


@pytest_asyncio.fixture(loop_scope="session")
async def club(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.begin() as conn:
        return await seed_organization(conn)


@pytest_asyncio.fixture(loop_scope="session")
async def other_club(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.begin() as conn:
        return await seed_organization(conn)


@pytest.fixture
def model() -> FakeModel:
    return FakeModel()


@pytest.fixture
def proposals(engine: AsyncEngine) -> FakeProposals:
    return FakeProposals(engine)


@pytest_asyncio.fixture(loop_scope="session")
async def agent(
    settings: AgentSettings,
    model: FakeModel,
    proposals: FakeProposals,
    amqp_url: str,
    topology: Topology,
) -> AsyncIterator[Any]:
    async with proposals.running(amqp_url, topology), running_agent(settings, model) as http:
        yield http
