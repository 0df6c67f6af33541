"""``signoff proposals …``: operator commands reading the proposals schema directly.

``show ID`` prints a proposal's status and its audit trail (oldest first), or ``--json`` for
machines. ``stuck`` lists proposals executing or needing reconciliation — those whose check was
escalated (inconclusive past the reconciler's bound: an operator must conclude them) first, then
oldest claim first — with their age and the last reconciliation check. They read the database
named by the usual settings (``SIGNOFF_DB__URL``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer
from signoff_contracts.v1 import AuditEntry, ProposalView
from signoff_runtime.db import create_engine
from signoff_runtime.settings import load as load_settings
from sqlalchemy.exc import DBAPIError

from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.outcomes import reconciliation
from signoff_proposals.settings import ProposalsSettings

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Inspect proposals and their audit trail."
)


@app.callback()
def _group() -> None:
    """Inspect proposals and their audit trail."""


@app.command()
def show(
    proposal_id: str = typer.Argument(..., help="The proposal id (prp_…)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Print a proposal's status, outcome and audit trail."""
    try:
        found = asyncio.run(_load(load_settings(ProposalsSettings, "proposals show"), proposal_id))
    except (DBAPIError, OSError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        typer.echo(f"cannot read the proposals database: {reason}", err=True)
        raise typer.Exit(2) from None
    if found is None:
        typer.echo(f"no proposal {proposal_id}", err=True)
        raise typer.Exit(1)
    shown, trail = found
    if as_json:
        typer.echo(
            json.dumps(
                {
                    **shown.model_dump(mode="json"),
                    "audit": [e.model_dump(mode="json") for e in trail],
                },
                indent=2,
            )
        )
        return
    typer.echo(
        f"{shown.id}  {shown.operation_kind} v{shown.contract_version}  "
        f"org={shown.organization_id}  status={shown.status.value}"
    )
    typer.echo(f"created {shown.created_at.isoformat()}  expires {shown.expires_at.isoformat()}")
    if shown.outcome is not None:
        typer.echo(f"outcome {shown.outcome.model_dump_json()}")
    for entry in trail:
        move = f"{entry.from_status or '-'} -> {entry.to_status or '-'}"
        detail = json.dumps(entry.detail, sort_keys=True) if entry.detail else ""
        typer.echo(
            f"{entry.at.isoformat()}  {entry.actor:<24} {entry.action:<20} {move:<32} "
            f"{detail}".rstrip()
        )


@app.command()
def stuck(
    limit: int = typer.Option(50, "--limit", min=1, max=1000),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Proposals executing or needing reconciliation, escalated first, then oldest first, with
    their last check."""
    try:
        rows = asyncio.run(_stuck(load_settings(ProposalsSettings, "proposals stuck"), limit))
    except (DBAPIError, OSError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        typer.echo(f"cannot read the proposals database: {reason}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    for row in rows:
        last = (
            f"check {row['check_number']} {row['result']} at {row['checked_at'].isoformat()}"
            if row["check_number"] is not None
            else "no check yet"
        )
        escalated = "ESCALATED  " if row["escalated_at"] is not None else ""
        typer.echo(
            f"{row['id']}  {escalated}{row['status']:<21} age={_age(row['age_s']):>8}  "
            f"{row['operation_kind']}  org={row['organization_id']}  {last}"
        )


def _age(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


async def _stuck(settings: ProposalsSettings, limit: int) -> list[dict[str, Any]]:
    engine = create_engine(settings.db, application_name="signoff-cli")
    try:
        async with engine.connect() as conn:
            return await reconciliation.stuck(conn, limit)
    finally:
        await engine.dispose()


async def _load(
    settings: ProposalsSettings, proposal_id: str
) -> tuple[ProposalView, list[AuditEntry]] | None:
    engine = create_engine(settings.db, application_name="signoff-cli")
    try:
        async with engine.connect() as conn:
            row = await repo.get(conn, proposal_id)
            if row is None:
                return None
            return repo.view(row), await repo.audit_trail(conn, proposal_id)
    finally:
        await engine.dispose()
