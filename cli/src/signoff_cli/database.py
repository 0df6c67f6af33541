"""``signoff db``: create the database if it is missing, migrate every owner's schema, give
each service its own database role (``signoff_runtime.roles``), and wait until a schema is
migrated (a Kubernetes init container's check before a service starts).

These commands read only ``SIGNOFF_ENV`` and ``SIGNOFF_DB__*`` (``DatabaseCommandSettings``):
the migration Job is given the database and nothing else, and needs nothing else.
"""

from __future__ import annotations

import asyncio
import time
from types import ModuleType
from typing import Literal, Protocol

import asyncpg
import typer
from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.roles import ACCESS, RolesRefused, domains, passwords, role_name
from signoff_runtime.settings import DatabaseSettings, load
from sqlalchemy.engine import make_url

app = typer.Typer(no_args_is_help=True, help="Database set-up.")


class DatabaseCommandSettings(BaseSettings):
    """What ``signoff db`` reads: the environment's name and the database group."""

    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_", env_nested_delimiter="__", extra="ignore", env_file=None
    )

    env: Literal["dev", "test", "prod"] = "dev"
    db: DatabaseSettings = DatabaseSettings()

    @model_validator(mode="after")
    def _refuse_unsafe_production(self) -> DatabaseCommandSettings:
        if self.env == "prod" and (found := self.db.prod_refusals()):
            raise ValueError("; ".join(found))
        return self


class _Migrating(Protocol):
    @property
    def env(self) -> str: ...
    @property
    def db(self) -> DatabaseSettings: ...


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
    url = load(DatabaseCommandSettings, "db create").db.url
    created = asyncio.run(ensure_database(url))
    typer.echo(f"database {make_url(url).database}: {'created' if created else 'exists'}")


def migrate_all(settings: _Migrating) -> list[str]:
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
        for owner in _migrations().upgrade_all(settings.db.url, db=settings.db, env=settings.env)
    ]
    names = ", ".join(role_name(settings.db.role_prefix, s) for s in ACCESS)
    return [*lines, f"database roles: {names}"]


@app.command()
def migrate() -> None:
    """Upgrade every owner's schema to its newest revision and grant each service's role its
    privileges (``SIGNOFF_DB__PASSWORDS__<SERVICE>`` set their passwords)."""
    for line in migrate_all(load(DatabaseCommandSettings, "db migrate")):
        typer.echo(line)


@app.command()
def wait(
    owners: list[str] = typer.Argument(
        None, help="The schemas' owners to wait for (agent, proposals, …); default: every one."
    ),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds before giving up (exit 1)."),
) -> None:
    """Wait until each owner's schema is at the newest revision this installation holds.

    A service's init container runs it as the service's own role: the service does not start
    against a schema its code does not know (the migration Job of the same release has not run
    yet). Unreachable database, missing role or older revision all count as not yet."""
    url = load(DatabaseCommandSettings, "db wait").db.url
    deadline = time.monotonic() + timeout
    try:
        behind = _behind(url, owners or None)
    except ValueError as exc:  # an owner this image does not hold: a mistake, not a wait
        typer.echo(f"signoff db wait: {exc}", err=True)
        raise typer.Exit(2) from None
    while behind:
        if time.monotonic() >= deadline:
            typer.echo(f"signoff db wait: not migrated after {timeout:g} s: {behind}", err=True)
            raise typer.Exit(1)
        time.sleep(min(2.0, max(deadline - time.monotonic(), 0.0)))
        behind = _behind(url, owners or None)
    typer.echo(f"migrated: {', '.join(owners or ['every owner'])}")


def _behind(url: str, owners: list[str] | None) -> str:
    """What is not migrated yet, in one line ('' when everything is)."""
    try:
        return "; ".join(asyncio.run(_migrations().pending(url, owners)))
    except ValueError:
        raise  # an owner this installation does not know: a mistake, not a wait
    except Exception as exc:  # unreachable, or the role not created yet: the Job may be running
        return f"database not ready ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"


def _migrations() -> ModuleType:
    """``signoff_runtime.migrations``, imported when a command migrates: it brings Alembic
    (≈ 7 MB), which ``signoff serve`` — this module is imported for every command — never uses."""
    import signoff_runtime.migrations

    return signoff_runtime.migrations
