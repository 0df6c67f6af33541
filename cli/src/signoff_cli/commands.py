"""``signoff``: core commands here, everything else mounted from ``signoff.cli`` entry points.

Core: ``token`` (prints only a bearer token), ``keys generate`` (a fresh Ed25519 key pair),
``serve SERVICE`` (runs a service found under ``signoff.services``), ``db create`` /
``db migrate`` / ``db wait``, ``dev run`` (what ``make run`` calls) and ``--version``.

Every command reads its settings through ``signoff_runtime.settings.load``: a refused or
malformed setting ends the command with one line naming the variable (exit code 2), never a
traceback.

``SIGNOFF_ENV``: ``serve`` refuses to start without it (an image must say what it is; no silent
``dev``); ``dev run`` sets ``dev`` for the services it starts, test fixtures set ``test``. The
other commands — an operator's tools — keep the ``dev`` default of ``ServiceSettings``.
A service or domain adds its own group (``signoff proposals show``, ``signoff demo seed``) by
declaring a ``signoff.cli`` entry point that names a ``typer.Typer``.
"""

from __future__ import annotations

import asyncio
import json
from enum import StrEnum
from importlib.metadata import entry_points, version

import typer
from signoff_runtime import keys
from signoff_runtime.registry import load_directory
from signoff_runtime.settings import IssuerSettings, ServiceSettings, load
from signoff_runtime.tokens import AGENT_AUDIENCE, PROPOSALS_AUDIENCE, issue_token

from signoff_cli import database, dev, docs, serving, status

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="signoff: propose, approve, execute."
)
app.add_typer(database.app, name="db")
app.add_typer(dev.app, name="dev")
app.add_typer(docs.app, name="docs")
app.command("status")(status.status)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"signoff {version('signoff-cli')}")
        raise typer.Exit()


@app.callback()
def _main(
    _version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """signoff: propose, approve, execute."""


keys_app = typer.Typer(no_args_is_help=True, help="Ed25519 keys for tokens and contracts.")
app.add_typer(keys_app, name="keys")


class TokenSettings(ServiceSettings):
    """``signoff token`` is an issuer: it reads the token private key (``SIGNOFF_AUTH__*``)."""

    auth: IssuerSettings = IssuerSettings()


class Audience(StrEnum):
    agent = "agent"
    proposals = "proposals"
    both = "both"


_AUDIENCES = {Audience.agent: AGENT_AUDIENCE, Audience.proposals: PROPOSALS_AUDIENCE}


@app.command()
def token(
    user: str = typer.Option(..., "--user", help="The user id (usr_…) or e-mail to issue for."),
    org: str | None = typer.Option(None, "--org", help="Organization id; needed if several."),
    ttl: int | None = typer.Option(None, "--ttl", help="Lifetime in seconds."),
    audience: Audience = typer.Option(
        Audience.both, "--audience", help="The API it is for: agent, proposals (approving) or both."
    ),
) -> None:
    """Print a bearer token for a member (and nothing else)."""
    settings = load(TokenSettings, "token")
    user_id, org_id = asyncio.run(_resolve_member(settings, user, org))
    aud = _AUDIENCES.get(audience)
    typer.echo(issue_token(settings.auth, user_id, org_id, ttl, audience=aud))


@keys_app.command("generate")
def generate_keys(
    kid: str | None = typer.Option(None, "--kid", help="Key id; default: derived from the key."),
) -> None:
    """Print a fresh Ed25519 pair as JSON: ``kid``, ``private_key``, ``public_key`` (base64url).

    The private key goes to the one holder (the web and ``signoff token`` for tokens, the
    proposals service for contracts); ``{kid: public_key}`` to the verifiers.
    """
    derived, private, public = keys.generate()
    found = {"kid": kid or derived, "private_key": private, "public_key": public}
    typer.echo(json.dumps(found))


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


def _installed_services() -> str:
    names = sorted(ep.name for ep in entry_points(group="signoff.services"))
    return ", ".join(names) or "none installed"


@app.command()
def serve(
    service: str = typer.Argument(..., help=f"One of the installed: {_installed_services()}."),
) -> None:
    """Run one service in the foreground until SIGTERM or Ctrl-C."""
    serving.refuse_without_env(service)
    found = serving.find(service)
    if found is None:
        known = ", ".join(sorted(ep.name for ep in entry_points(group="signoff.services")))
        raise typer.BadParameter(f"unknown service; known: {known}")
    serving.run(service, found)


def mount_plugins() -> None:
    for ep in entry_points(group="signoff.cli"):
        app.add_typer(ep.load(), name=ep.name)
