"""Count the SQL statements a block sends: a performance budget a test can pin."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


@contextlib.contextmanager
def statements(engine: AsyncEngine) -> Iterator[tuple[list[str], list[str]]]:
    """The SQL statements sent on ``engine`` inside the block (each one round trip): those
    SQLAlchemy runs, and those run on its connections' asyncpg connection directly
    (``signoff_runtime.hot``, seen by asyncpg's query logger; its BEGIN and COMMIT are the
    transaction's, which SQLAlchemy's count leaves out too) — the two apart."""
    core: list[str] = []
    hot: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        core.append(statement)

    def logged(record: Any) -> None:
        if not record.query.startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            hot.append(record.query)

    def checkout(dbapi_conn: Any, *_: Any) -> None:
        dbapi_conn.driver_connection.add_query_logger(logged)

    def checkin(dbapi_conn: Any, *_: Any) -> None:
        dbapi_conn.driver_connection.remove_query_logger(logged)

    listeners: list[tuple[Any, str, Callable[..., Any]]] = [
        (engine.sync_engine, "before_cursor_execute", count),
        (engine.sync_engine.pool, "checkout", checkout),
        (engine.sync_engine.pool, "checkin", checkin),
    ]
    for target, name, fn in listeners:
        event.listen(target, name, fn)
    try:
        yield core, hot
    finally:
        for target, name, fn in listeners:
            event.remove(target, name, fn)
