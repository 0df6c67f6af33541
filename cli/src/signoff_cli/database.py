"""``signoff db``: create the database if it is missing, and migrate every owner's schema."""

from __future__ import annotations

import asyncio

import asyncpg
import typer
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.migrations import upgrade_all
from signoff_runtime.settings import ServiceSettings
from sqlalchemy.engine import make_url

app = typer.Typer(no_args_is_help=True, help="Database set-up.")


async def ensure_database(url: str) -> bool:
    """Create the database named in ``url`` if it does not exist; ``True`` if it was created."""
    target = make_url(url)
    admin = asyncpg_dsn(target.set(database="postgres").render_as_string(hide_password=False))
    conn = await asyncpg.connect(admin)
    try:
        exists = await conn.fetchval(
            "SELECT 1 FROM pg_database WHERE datname = $1", target.database
        )
        if exists:
            return False
        await conn.execute(f'CREATE DATABASE "{target.database}"')
        return True
    finally:
        await conn.close()


@app.command()
def create() -> None:
    """Create the configured database if it is missing."""
    url = ServiceSettings().db.url
    created = asyncio.run(ensure_database(url))
    typer.echo(f"database {make_url(url).database}: {'created' if created else 'exists'}")


@app.command()
def migrate() -> None:
    """Upgrade every owner's schema to its newest revision."""
    for owner in upgrade_all(ServiceSettings().db.url):
        typer.echo(f"migrated {owner}")
