"""pytest fixtures for signoff's integration tests and for adopters' operation tests.

- ``database_url``: a fresh database, every owner's schema migrated, dropped at the end;
- ``engine``: an async engine on it;
- ``amqp_url`` and ``topology``: the broker, and a fresh name prefix per test (cleaned up);
- ``settings_env``: the ``SIGNOFF_*`` environment that points a service process at both;
  ``service_env``: the same for one named service, connecting as its own database role.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack

import aio_pika
import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_runtime.testing import servers
from signoff_runtime.testing.databases import fresh_database, session_engine
from signoff_runtime.testing.processes import as_own_role
from signoff_runtime.topology import Topology


@pytest.fixture(scope="session")
def _servers() -> Iterator[tuple[str, str]]:
    with ExitStack() as stack:
        yield servers.postgres_url(stack), servers.amqp_url(stack)


@pytest.fixture(scope="session")
def amqp_url(_servers: tuple[str, str]) -> str:
    return _servers[1]


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def database_url(_servers: tuple[str, str]) -> AsyncIterator[str]:
    async with fresh_database(_servers[0], "signoff_test") as url:
        yield url


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = session_engine(database_url)
    yield eng
    await eng.dispose()


@pytest_asyncio.fixture(loop_scope="session")
async def topology(amqp_url: str) -> AsyncIterator[Topology]:
    """A fresh, declared topology under a prefix of its own, deleted after the test."""
    topo = Topology(f"t{secrets.token_hex(4)}", delivery_limit=3)
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        await topo.declare(await connection.channel())
    yield topo
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        await topo.delete(await connection.channel())


@pytest.fixture
def settings_env(database_url: str, amqp_url: str, topology: Topology) -> dict[str, str]:
    """Environment for a service process pointed at this test's database and queues."""
    return {
        "SIGNOFF_ENV": "test",
        "SIGNOFF_DB__URL": database_url,
        "SIGNOFF_AMQP__URL": amqp_url,
        "SIGNOFF_AMQP__PREFIX": topology.prefix,
        "SIGNOFF_AMQP__DELIVERY_LIMIT": str(topology.delivery_limit),
        "SIGNOFF_LOG_JSON": "true",
    }


@pytest.fixture
def service_env(settings_env: dict[str, str]) -> Callable[[str], dict[str, str]]:
    """``service_env("executor")``: ``settings_env`` as that service's own database role, with
    only its privileges — how the service runs when deployed."""
    return lambda name: as_own_role(settings_env, name)
