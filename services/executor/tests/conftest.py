"""Fixtures of the executor's tests: a database with the executor's schema, the
toy domain's schema (``signoff_conformance.toy``), a scriptable provider, the operations.

``tests/`` goes on ``sys.path`` so tests (and service processes started by them) import the test
operations as ``support``.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aio_pika
import asyncpg
import pytest
import pytest_asyncio
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

TESTS = Path(__file__).parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from signoff_conformance.toy.vouchers import SendVoucher, VoucherProvider  # noqa: E402
from signoff_executor.settings import ExecutorSettings  # noqa: E402
from signoff_runtime.db import asyncpg_dsn  # noqa: E402
from signoff_runtime.migrations import config_for  # noqa: E402
from signoff_runtime.registry import Operations  # noqa: E402
from signoff_runtime.testing.databases import session_engine  # noqa: E402
from signoff_runtime.topology import Topology  # noqa: E402
from support import harness, toy  # noqa: E402
from support.bus import Bus  # noqa: E402
from support.toy import FaultyGrant  # noqa: E402

OWN_MIGRATIONS = ("signoff_executor.migrations",)


@pytest_asyncio.fixture(scope="session")
async def database_url(_servers: tuple[str, str]) -> AsyncIterator[str]:
    """A fresh database with only the schemas these tests use migrated.

    Overrides the plugin's all-owners fixture so another owner's migration (under construction
    in the same repository) cannot break the executor's tests, and the other way round.
    """
    server = _servers[0]
    name = f"signoff_exec_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(asyncpg_dsn(server))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    await asyncio.to_thread(_migrate, url)
    yield url
    admin = await asyncpg.connect(asyncpg_dsn(server))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest_asyncio.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """Overridden with ``database_url`` so this directory's tests and its database agree (the
    plugin's session-wide engine would follow whichever directory asked first)."""
    eng = session_engine(database_url)
    yield eng
    await eng.dispose()


def _migrate(url: str) -> None:
    import importlib

    for module_name in OWN_MIGRATIONS:
        module = importlib.import_module(module_name)
        assert module.__file__ is not None
        command.upgrade(config_for(Path(module.__file__).parent, url), "head")


@pytest_asyncio.fixture(scope="session")
async def domain_schema(engine: AsyncEngine) -> None:
    await toy.create(engine)


@pytest_asyncio.fixture
async def settings(
    database_url: str, amqp_url: str, topology: Topology, engine: AsyncEngine, domain_schema: None
) -> ExecutorSettings:
    """Executor settings on this test's queues.

    Outbox rows an earlier test left unsent name that test's (deleted) exchanges; they are
    marked sent so this test's relays publish only this test's messages.
    """
    async with engine.begin() as conn:
        for schema in ("executor",):
            await conn.execute(
                text(
                    f"UPDATE {schema}.outbox SET sent_at = now(), last_error = 'stale test row' "
                    "WHERE sent_at IS NULL"
                )
            )
    return harness.settings(database_url, amqp_url, topology)


@pytest.fixture
def provider() -> VoucherProvider:
    return VoucherProvider()


@pytest.fixture
def operations(provider: VoucherProvider) -> Operations:
    return Operations([FaultyGrant(), SendVoucher(provider)])


@pytest_asyncio.fixture
async def bus(amqp_url: str, topology: Topology) -> AsyncIterator[Bus]:
    connection = await aio_pika.connect_robust(amqp_url)
    async with connection:
        yield Bus(connection, topology)
