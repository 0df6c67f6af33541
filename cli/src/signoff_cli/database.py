"""``signoff db``: create the database if it is missing, migrate every owner's schema, and give
each service its own database role (``signoff_runtime.roles``)."""

from __future__ import annotations

import asyncio

import asyncpg
import typer
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.migrations import upgrade_all
from signoff_runtime.roles import ACCESS, RolesRefused, domains, passwords, role_name
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


def migrate_all(settings: ServiceSettings) -> list[str]:
    """Migrate and set up the roles; the lines to print. A production role without its own
    password, or a domain without its privileges, is refused before anything changes (one line,
    exit code 2)."""
    try:
        passwords(settings.db, settings.env)
        domains()
    except RolesRefused as exc:
        typer.echo(f"signoff db migrate: refusing: {exc}", err=True)
        raise typer.Exit(2) from None
    lines = [
        f"migrated {owner}"
        for owner in upgrade_all(settings.db.url, db=settings.db, env=settings.env)
    ]
    names = ", ".join(role_name(settings.db.role_prefix, s) for s in ACCESS)
    return [*lines, f"database roles: {names}"]


@app.command()
def migrate() -> None:
    """Upgrade every owner's schema to its newest revision and grant each service's role its
    privileges (``SIGNOFF_DB__PASSWORDS__<SERVICE>`` set their passwords)."""
    for line in migrate_all(ServiceSettings()):
        typer.echo(line)
