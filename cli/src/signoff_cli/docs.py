"""``signoff docs export``: the interface documents and broker definitions, generated.

Writes ``docs/api/<service>.asyncapi.json`` (every service's AMQP interface), the OpenAPI
document of every HTTP API (``docs/api/<service>.openapi.json``) and
``deploy/rabbitmq/definitions.json``. ``--check`` writes nothing and fails when a committed file
differs from what the code generates (a test runs it).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import typer

from signoff_cli import interfaces, rabbit_definitions

app = typer.Typer(no_args_is_help=True, help="Interface documents and broker definitions.")

#: services with an HTTP API of their own (the others answer only /healthz and /metrics)
HTTP_APIS = {"agent": "signoff_agent.app", "proposals": "signoff_proposals.app"}


def openapi(service: str) -> dict[str, Any]:
    module = importlib.import_module(HTTP_APIS[service])
    document: dict[str, Any] = module.create_app().openapi()
    return document


def documents() -> dict[str, Any]:
    """Every generated file, by its path relative to the repository root."""
    files: dict[str, Any] = {
        f"docs/api/{s}.asyncapi.json": interfaces.asyncapi(s) for s in interfaces.CONSUMES
    }
    files.update({f"docs/api/{s}.openapi.json": openapi(s) for s in HTTP_APIS})
    files["deploy/rabbitmq/definitions.json"] = rabbit_definitions.definitions()
    return files


def render(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def stale(root: Path) -> list[str]:
    """Generated files whose committed copy differs (or is missing)."""
    out = []
    for relative, document in documents().items():
        path = root / relative
        if not path.exists() or path.read_text() != render(document):
            out.append(relative)
    return out


@app.command("export")
def export(
    root: Path = typer.Option(Path("."), "--root", help="The repository root."),
    check: bool = typer.Option(False, "--check", help="Only report stale files (exit 1)."),
) -> None:
    """Write (or, with --check, verify) docs/api/*.json and deploy/rabbitmq/definitions.json."""
    if check:
        outdated = stale(root)
        for relative in outdated:
            typer.echo(f"stale: {relative}")
        raise typer.Exit(1 if outdated else 0)
    for relative, document in documents().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(document))
        typer.echo(relative)
