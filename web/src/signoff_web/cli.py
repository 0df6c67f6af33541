"""``signoff web …``: operators' commands for the web (entry point ``signoff.cli``: ``web``).

``signoff web revoke-sessions --user usr_…`` ends every live web session of a person at once
(someone removed from a club, a lost laptop): their cookies, copies included, stop working on the
next request. It prints how many sessions it ended.
"""

from __future__ import annotations

import asyncio

import typer
from signoff_runtime.settings import load as load_settings
from sqlalchemy.ext.asyncio import create_async_engine

from signoff_web import session_store
from signoff_web.settings import WebSettings

app = typer.Typer(help="Operators' commands for the web frontend.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Keep ``revoke-sessions`` a subcommand even while it is the only one."""


@app.command("revoke-sessions")
def revoke_sessions(
    user: str = typer.Option(..., "--user", help="the person's id (usr_…)"),
) -> None:
    """End every live web session of a person; prints the number ended."""
    typer.echo(
        str(asyncio.run(_revoke(load_settings(WebSettings, "web revoke-sessions").db.url, user)))
    )


async def _revoke(url: str, user_id: str) -> int:
    engine = create_async_engine(url)
    try:
        return await session_store.revoke_person(engine, user_id)
    finally:
        await engine.dispose()
