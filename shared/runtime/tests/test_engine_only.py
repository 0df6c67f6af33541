"""SQLAlchemy's asyncio engine loads and runs without the ORM; the sessions still load when asked.

Each case runs in a fresh interpreter: this one imported ``sqlalchemy.ext.asyncio`` long ago.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import sqlalchemy.ext.asyncio
from signoff_runtime import engine_only


def _run(code: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_query_runs_without_the_orm_and_a_session_loads_it_later(database_url: str) -> None:
    out = _run(
        """
        import asyncio, sys
        from signoff_runtime import engine_only
        print(engine_only.install(), "sqlalchemy.orm" in sys.modules)
        import sqlalchemy.ext.asyncio as package
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
        from sqlalchemy.ext.asyncio.engine import AsyncEngine as Original

        async def main():
            engine = create_async_engine(sys.argv[1])
            async with engine.begin() as conn:
                value = await conn.scalar(text("select 41 + 1"))
            await engine.dispose()
            return value

        print(asyncio.run(main()), AsyncEngine is Original, "sqlalchemy.orm" in sys.modules)
        from sqlalchemy.ext.asyncio import AsyncSession
        from sqlalchemy.ext.asyncio.session import AsyncSession as Session
        print(AsyncSession is Session, package.async_sessionmaker.__name__)
        print("sqlalchemy.orm" in sys.modules, "__getattr__" in vars(package))
        """,
        database_url,
    )
    assert out == [
        *("True", "False"),  # installed, nothing of the ORM loaded
        *("42", "True", "False"),  # the engine is SQLAlchemy's own and runs a query without it
        *("True", "async_sessionmaker"),  # a session, asked for, is the real one
        *("True", "False"),  # now the ORM is loaded, and the package is the plain one
    ], out


def test_an_import_of_a_submodule_is_not_mistaken_for_a_session() -> None:
    out = _run(
        """
        import sys
        from signoff_runtime import engine_only
        engine_only.install()
        from sqlalchemy.ext.asyncio import base, exc  # submodules: the import system's to load
        print(exc.__name__, base.__name__, "sqlalchemy.orm" in sys.modules)
        """
    )
    assert out == ["sqlalchemy.ext.asyncio.exc", "sqlalchemy.ext.asyncio.base", "False"], out


def test_nothing_changes_where_the_package_is_already_imported() -> None:
    assert engine_only.install() is False
    assert "__getattr__" not in vars(sqlalchemy.ext.asyncio)
