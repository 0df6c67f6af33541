"""PostgreSQL access: one async engine per process, SQLAlchemy Core on asyncpg.

Core, not ORM sessions: measured on this stack, sessions reached a fraction of Core's
throughput. The few statements every contract and claim runs skip Core too (``hot``). Every
expiry and deadline is decided by the database's clock inside the statement that acts on it
(``statement_timestamp()``, ``now()``), never by a process clock.
The unit of work is ``signoff_runtime.unit_of_work``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from signoff_runtime.settings import DatabaseSettings


def create_engine(settings: DatabaseSettings, *, application_name: str = "signoff") -> AsyncEngine:
    engine = create_async_engine(
        settings.url,
        pool_size=settings.pool_size,
        max_overflow=0,
        pool_pre_ping=False,
        connect_args={
            "server_settings": {
                "application_name": application_name,
                "statement_timeout": str(settings.statement_timeout_ms),
            }
        },
    )
    event.listen(engine.sync_engine, "checkout", refuse_a_stray_transaction)
    return engine


def refuse_a_stray_transaction(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Drop a pooled connection left inside a transaction SQLAlchemy does not know of.

    asyncpg marks a connection's transaction as begun *before* it sends ``BEGIN``; a ``BEGIN``
    cancelled or failed on its way leaves the mark (only asyncpg's own pool clears it, which
    SQLAlchemy does not use), and SQLAlchemy's reset on return, holding no transaction, rolls
    nothing back. The next ``BEGIN`` on the connection would then be a ``SAVEPOINT``: inside the
    server's leftover transaction, every later unit of work would "commit" by releasing a
    savepoint — visible to no one, holding its locks, rolled back when the connection closes.
    (Seen in the fault suite: an execution's committed attempt was gone 3 ms later.) Raising
    ``DisconnectionError`` makes the pool close it and hand out a fresh one."""
    driver = getattr(dbapi_connection, "_connection", None)
    if driver is None or getattr(dbapi_connection, "_transaction", None) is not None:
        return
    if getattr(driver, "_top_xact", None) is not None or driver.is_in_transaction():
        raise exc.DisconnectionError("a pooled connection was left inside a transaction")


def asyncpg_dsn(url: str) -> str:
    """The plain ``postgresql://`` DSN asyncpg wants (LISTEN connections, bulk loaders)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
