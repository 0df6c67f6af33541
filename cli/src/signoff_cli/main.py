"""``signoff``: core commands here, everything else mounted from ``signoff.cli`` entry points.

Core: ``token`` (prints only a bearer token), ``serve SERVICE`` (runs a service found under
``signoff.services``), ``db create`` / ``db migrate``, and ``dev run`` (what ``make run`` calls).
A service or domain adds its own group (``signoff proposals show``, ``signoff demo seed``) by
declaring a ``signoff.cli`` entry point that names a ``typer.Typer``.
"""

from __future__ import annotations

import asyncio
import sys
from importlib.metadata import entry_points

import typer
from signoff_runtime.registry import load_directory
from signoff_runtime.settings import ServiceSettings
from signoff_runtime.tokens import issue_token

from signoff_cli import database, dev, docs, status

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="signoff: propose, approve, execute."
)
app.add_typer(database.app, name="db")
app.add_typer(dev.app, name="dev")
app.add_typer(docs.app, name="docs")
app.command("status")(status.status)


@app.command()
def token(
    user: str = typer.Option(..., "--user", help="The user id (usr_…) or e-mail to issue for."),
    org: str | None = typer.Option(None, "--org", help="Organization id; needed if several."),
    ttl: int | None = typer.Option(None, "--ttl", help="Lifetime in seconds."),
) -> None:
    """Print a bearer token for a member (and nothing else)."""
    settings = ServiceSettings()
    user_id, org_id = asyncio.run(_resolve_member(settings, user, org))
    typer.echo(issue_token(settings.auth, user_id, org_id, ttl))


async def _resolve_member(settings: ServiceSettings, user: str, org: str | None) -> tuple[str, str]:
    from signoff_runtime.db import create_engine

    engine = create_engine(settings.db, application_name="signoff-cli")
    try:
        async with engine.connect() as conn:
            members = await load_directory().memberships(conn, user)
    finally:
        await engine.dispose()
    if org is not None:
        members = [m for m in members if m.organization_id == org]
    if len(members) != 1:
        raise typer.BadParameter(
            f"{user!r} has {len(members)} matching memberships; pass --org"
            if members
            else f"{user!r} is not a member of any organization",
            param_hint="--user",
        )
    return members[0].user_id, members[0].organization_id


@app.command()
def serve(
    service: str = typer.Argument(..., help="agent, proposals, executor or reconciler"),
) -> None:
    """Run one service in the foreground until SIGTERM or Ctrl-C."""
    found = {ep.name: ep for ep in entry_points(group="signoff.services")}
    if service not in found:
        raise typer.BadParameter(f"unknown service; known: {', '.join(sorted(found))}")
    found[service].load()()


def _mount_plugins() -> None:
    for ep in entry_points(group="signoff.cli"):
        app.add_typer(ep.load(), name=ep.name)


def main() -> None:
    _mount_plugins()
    sys.exit(app())
