"""PostgreSQL access: one async engine per process, SQLAlchemy Core on asyncpg.

Core, not ORM sessions: measured on this stack, sessions reached a fraction of Core's
throughput. The few statements every contract and claim runs skip Core too (``hot``). Every
expiry and deadline is decided by the database's clock inside the statement that acts on it
(``statement_timestamp()``, ``now()``), never by a process clock.
The unit of work is ``signoff_runtime.unit_of_work``.
"""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from signoff_runtime.settings import DatabaseSettings


def create_engine(settings: DatabaseSettings, *, application_name: str = "signoff") -> AsyncEngine:
    return create_async_engine(
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


def asyncpg_dsn(url: str) -> str:
    """The plain ``postgresql://`` DSN asyncpg wants (LISTEN connections, bulk loaders)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
