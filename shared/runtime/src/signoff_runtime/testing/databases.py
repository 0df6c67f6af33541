"""A throwaway database: created on a server, every owner's schema migrated, dropped after.

The tests' ``database_url`` fixture and the services' white-box microbenchmarks
(``signoff_runtime.testing.cpu``) make theirs here, so each run has a database of its own and
the server's others (a running ``make run``, other suites) are never touched.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.migrations import upgrade_all


def session_engine(url: str) -> AsyncEngine:
    """The engine a test session shares on its database. It keeps few idle connections: a
    worker may hold several such engines at once (the plugin's, a service directory's own), and
    ``make test``'s two workers share PostgreSQL's stock 100 connections."""
    return create_async_engine(url, pool_size=4, max_overflow=16)


@asynccontextmanager
async def fresh_database(server_url: str, prefix: str = "signoff_test") -> AsyncIterator[str]:
    """The URL of a new database named ``prefix`` + a random suffix on the server at
    ``server_url`` (connected to as its maintenance database), migrated; dropped on exit, its
    remaining connections closed by force."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    await _admin(server_url, f'CREATE DATABASE "{name}"')
    try:
        url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
        await asyncio.to_thread(upgrade_all, url)
        yield url
    finally:
        await _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _admin(server_url: str, statement: str) -> None:
    admin = await asyncpg.connect(asyncpg_dsn(server_url))
    try:
        await admin.execute(statement)
    finally:
        await admin.close()
