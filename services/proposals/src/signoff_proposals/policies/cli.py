"""``signoff policies list|set``: an operator's view and change of an organization's policies.

``list --org ORG`` prints each installed operation kind with its policy in force (or the
default) and the facts a rule may test. ``set --org ORG KIND`` saves a new version, from
``--file`` (the JSON the HTTP API takes: ``{"rules": [...]}``) or from one rule's options::

    signoff policies set --org org_… order.refund_missing_discount \\
        --when 'amount_cents > 10000' --approvals 2 --role manager --no-proposer

``--default`` saves the default (no rules). The policy is checked against the operation exactly
as the HTTP API checks it; the change is recorded as made by ``--by`` (``operator:<login>`` by
default). It reads and writes the database named by the usual settings (``SIGNOFF_DB__URL``).
"""

from __future__ import annotations

import asyncio
import getpass
import json
import re
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from signoff_runtime.db import create_engine
from signoff_runtime.registry import Operations, UnknownOperation
from sqlalchemy.exc import DBAPIError

from signoff_proposals.context import load_domain
from signoff_proposals.policies import domain, manage
from signoff_proposals.settings import ProposalsSettings

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="See and change approval policies."
)
_WHEN = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(>=|<=|==|!=|>|<)\s*(.+?)\s*$")


@app.callback()
def _group() -> None:
    """See and change approval policies."""


@app.command("list")
def list_(
    org: str = typer.Option(..., "--org", help="The organization id (org_…)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Each operation kind's policy in force, its version and the facts it may test."""
    items = _run(_list(org))
    if as_json:
        typer.echo(json.dumps({"items": items}, indent=2))
        return
    for item in items:
        version = f"v{item['version']}" if item["version"] is not None else "default"
        facts = ", ".join(f"{k}: {v}" for k, v in item["facts"].items()) or "none"
        typer.echo(f"{item['operation_kind']}  {version}  (facts: {facts})")
        for line in item["summary"]:
            typer.echo(f"  {line}")


@app.command("set")
def set_(
    kind: str = typer.Argument(..., help="The operation kind (order.refund_…)."),
    org: str = typer.Option(..., "--org", help="The organization id (org_…)."),
    file: Path | None = typer.Option(None, "--file", help='JSON: {"rules": [...]}.'),
    when: str | None = typer.Option(None, "--when", help="A condition: 'amount_cents > 10000'."),
    approvals: int = typer.Option(1, "--approvals", min=1, max=domain.MAX_APPROVALS),
    role: list[str] = typer.Option([], "--role", help="A role that counts (repeatable)."),
    no_proposer: bool = typer.Option(False, "--no-proposer", help="The proposer may not approve."),
    default: bool = typer.Option(False, "--default", help="Save the default: no rules."),
    by: str | None = typer.Option(None, "--by", help="Who makes the change (for the record)."),
) -> None:
    """Save a new version of the organization's policy for KIND."""
    policy = _policy(file, when, approvals, role, no_proposer, default)
    saved = _run(_save(org, kind, policy, by or f"operator:{getpass.getuser()}"))
    typer.echo(f"{kind}  v{saved['version']}")
    for line in saved["summary"]:
        typer.echo(f"  {line}")


def _policy(
    file: Path | None,
    when: str | None,
    approvals: int,
    roles: list[str],
    no_proposer: bool,
    default: bool,
) -> domain.Policy:
    try:
        if default:
            return domain.Policy()
        if file is not None:
            return domain.Policy.model_validate_json(file.read_text(encoding="utf-8"))
        rule: dict[str, Any] = {"approvals": approvals, "proposer_may_approve": not no_proposer}
        if roles:
            rule["roles"] = roles
        if when is not None:
            rule["when"] = _condition(when)
        return domain.Policy.model_validate({"rules": [rule]})
    except (ValidationError, OSError) as exc:
        typer.echo(f"not a valid policy: {exc}", err=True)
        raise typer.Exit(2) from None


def _condition(text: str) -> dict[str, Any]:
    match = _WHEN.match(text)
    if match is None:
        typer.echo(f"--when must look like 'amount_cents > 10000', not {text!r}", err=True)
        raise typer.Exit(2)
    fact, op, raw = match.groups()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return {"fact": fact, "op": op, "value": value}


def _run(work: Any) -> Any:
    try:
        return asyncio.run(work)
    except (DBAPIError, OSError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        typer.echo(f"cannot use the proposals database: {reason}", err=True)
        raise typer.Exit(2) from None
    except UnknownOperation as exc:
        typer.echo(f"no such operation: {exc.kind}", err=True)
        raise typer.Exit(1) from None
    except manage.PolicyRefused as refused:
        for problem in refused.problems:
            typer.echo(f"refused: {problem}", err=True)
        raise typer.Exit(1) from None


def _operations(settings: ProposalsSettings) -> Operations:
    return load_domain(settings)[0]


async def _list(org: str) -> list[dict[str, Any]]:
    settings = ProposalsSettings()
    engine = create_engine(settings.db, application_name="signoff-cli")
    try:
        async with engine.connect() as conn:
            return await manage.listing(conn, _operations(settings), org)
    finally:
        await engine.dispose()


async def _save(org: str, kind: str, policy: domain.Policy, by: str) -> dict[str, Any]:
    settings = ProposalsSettings()
    ops = _operations(settings)
    engine = create_engine(settings.db, application_name="signoff-cli")
    try:
        async with engine.begin() as conn:
            saved = await manage.save(conn, ops, org, kind, policy, by)
        return manage.shown(ops, kind, saved)
    finally:
        await engine.dispose()
