"""Running every owner's Alembic environment.

Each owner (a service, the domain) keeps its own Alembic environment and version table inside its
own schema, and names it by entry point (group ``signoff.migrations``, value: the package that
holds ``env.py`` and ``versions/``). ``upgrade_all`` migrates them all, then gives each service's
database role exactly its privileges on them (``roles``); ``run_env`` is what each ``env.py``
calls, so the environments stay one line long and cannot drift apart. ``pending`` tells which
owners' schemas are behind the revisions installed here (``signoff db wait``): an owner's schema
is named as its entry point.
"""

from __future__ import annotations

import asyncio
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

import asyncpg
from alembic import command, context
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from signoff_runtime import roles
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.settings import DatabaseSettings


def owners(group: str = "signoff.migrations") -> dict[str, Path]:
    found = {}
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        module = import_module(ep.value)
        assert module.__file__ is not None
        found[ep.name] = Path(module.__file__).parent
    return found


def config_for(location: Path, url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(location))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade_all(
    url: str, revision: str = "head", *, db: DatabaseSettings | None = None, env: str = "dev"
) -> list[str]:
    """Migrate every owner's schema, then set up the service roles (``roles.apply``: names and
    passwords from ``db``, development defaults if ``None``) as the role of ``url``. Blocking:
    call it outside an event loop or in a thread. Returns the owners migrated."""
    done = []
    for name, location in owners().items():
        command.upgrade(config_for(location, url), revision)
        done.append(name)
    asyncio.run(roles.apply(url, db or DatabaseSettings(), env))
    return done


async def pending(url: str, names: list[str] | None = None) -> list[str]:
    """The owners (all, or ``names``) whose schema is not at its newest installed revision, each
    as ``"owner: at <revision>, newest <head>"``. Raises if the database cannot be reached."""
    found = owners()
    if unknown := sorted(set(names or ()) - set(found)):
        raise ValueError(f"no migrations installed for {', '.join(unknown)}")
    behind = []
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        for name in names or sorted(found):
            heads = set(ScriptDirectory.from_config(config_for(found[name], url)).get_heads())
            try:
                # the owner's name comes from an installed entry point, not from input
                query = f'SELECT version_num FROM "{name}".alembic_version'  # noqa: S608
                rows = await conn.fetch(query)
            except (asyncpg.UndefinedTableError, asyncpg.InvalidSchemaNameError):
                rows = []
            at = {row["version_num"] for row in rows}
            if at != heads:
                was, newest = ", ".join(sorted(at)) or "nothing", ", ".join(sorted(heads))
                behind.append(f"{name}: at {was}, newest {newest}")
    finally:
        await conn.close()
    return behind


def run_env(schema: str, metadata: MetaData) -> None:
    """The body of every owner's ``env.py``: online, async, in ``schema``."""
    url = context.config.get_main_option("sqlalchemy.url")
    assert url is not None

    def _run(conn: Connection) -> None:
        conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        context.configure(
            connection=conn,
            target_metadata=metadata,
            version_table="alembic_version",
            version_table_schema=schema,
            include_schemas=True,
            include_name=lambda name, type_, _: type_ != "schema" or name == schema,
        )
        with context.begin_transaction():
            context.run_migrations()

    async def _main() -> None:
        engine = create_async_engine(url)
        async with engine.begin() as conn:
            await conn.run_sync(_run)
        await engine.dispose()

    asyncio.run(_main())
