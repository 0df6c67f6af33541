"""``signoff demo …``: demo data for a local run (entry point ``signoff.cli``: ``demo``).

``signoff demo seed`` prints only JSON on stdout, so scripts can pipe it into ``jq``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer
from pydantic_settings import BaseSettings, SettingsConfigDict
from signoff_runtime.settings import DatabaseSettings
from signoff_runtime.settings import load as load_settings
from sqlalchemy.ext.asyncio import create_async_engine

from signoff_club.seed import seed_demo

app = typer.Typer(help="Demo data for the club domain.", no_args_is_help=True)


class _Env(BaseSettings):
    """Only the database URL (``SIGNOFF_DB__URL``); the demo needs nothing else."""

    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_", env_nested_delimiter="__", extra="ignore"
    )

    db: DatabaseSettings = DatabaseSettings()


@app.callback()
def _group() -> None:
    """Keep ``seed`` a subcommand even while it is the only one."""


@app.command()
def seed() -> None:
    """Create two fresh demo organizations and print them (ids, sign-ins, cases) as JSON."""
    typer.echo(json.dumps(asyncio.run(_seed(load_settings(_Env, "demo seed").db.url)), indent=2))


async def _seed(url: str) -> dict[str, Any]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            return await seed_demo(conn)
    finally:
        await engine.dispose()
