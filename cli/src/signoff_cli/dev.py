"""``signoff dev run``: the whole system on one machine, for ``make run``.

It reads ``.env`` if there is one (``--env-file``): each variable not already set in the
environment, and not empty, is set for this command and the processes it starts. It is the only
command that reads such a file; services and every other command read their environment.

Creates the database if missing, migrates every schema and sets up one database role per service,
seeds the demo once (kept in ``.run/demo.json``), then runs every service and the provider
simulator as separate processes under honcho, with their logs interleaved; each service connects
as its own role (``SIGNOFF_DB__URL`` of its process), as it would when deployed. When every
``/healthz`` answers it prints where to look and who to sign in as; Ctrl-C stops everything.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import typer
from dotenv import dotenv_values
from signoff_runtime.roles import ACCESS, role_url
from signoff_runtime.settings import ServiceSettings, load
from sqlalchemy.engine import make_url

from signoff_cli import rabbit_users
from signoff_cli.database import ensure_database, migrate_all

app = typer.Typer(no_args_is_help=True, help="Run signoff locally.")
#: the ``signoff`` of this environment, whether or not its ``bin`` is on PATH
SIGNOFF = str(Path(sys.executable).with_name("signoff"))


#: name → (command, health URL). Ports are the defaults of DESIGN.md, each overridable by env.
def processes() -> dict[str, tuple[str, str]]:
    env = os.environ
    port = {
        "agent": env.get("SIGNOFF_AGENT__PORT", "8001"),
        "web": env.get("SIGNOFF_WEB__PORT", "8000"),
        "proposals": env.get("SIGNOFF_PROPOSALS__PORT", "8002"),
        "executor": env.get("SIGNOFF_EXECUTOR__PORT", "9103"),
        "reconciler": env.get("SIGNOFF_RECONCILER__PORT", "9104"),
        "provider": env.get("SIGNOFF_CARD_PROVIDER_PORT", "8010"),
        "model": env.get("SIGNOFF_MODEL_PORT", "8020"),
    }
    table = {
        name: (f"{SIGNOFF} serve {name}", f"http://127.0.0.1:{port[name]}/healthz")
        for name in ("proposals", "executor", "reconciler", "agent", "web")
    }
    table["provider"] = (
        f"{sys.executable} -m signoff_card_provider",
        f"http://127.0.0.1:{port['provider']}/healthz",
    )
    if not env.get("OPENAI_BASE_URL"):
        # no real model configured: the scripted one answers, with the club's demo script
        table["model"] = (
            f"{sys.executable} -m signoff_scripted_model",
            f"http://127.0.0.1:{port['model']}/healthz",
        )
        os.environ.setdefault("SIGNOFF_MODEL_SCRIPT", "club")
        os.environ.setdefault(
            "SIGNOFF_AGENT__SCRIPTED_MODEL_URL", f"http://127.0.0.1:{port['model']}/v1"
        )
    # ``signoff serve`` refuses to start without SIGNOFF_ENV: this command is the development run
    os.environ.setdefault("SIGNOFF_ENV", "dev")
    os.environ.setdefault("SIGNOFF_LOG_JSON", "false")  # people read these logs; JSON for machines
    # The club domain calls the simulator this command runs, wherever its port is.
    os.environ.setdefault("SIGNOFF_CLUB_PROVIDER_URL", f"http://127.0.0.1:{port['provider']}")
    return table


def procfile_lines(table: dict[str, tuple[str, str]], settings: ServiceSettings) -> str:
    """The Procfile: a service with a database role connects as it, not as the migrator."""
    lines = []
    for name, (cmd, _) in table.items():
        if name in ACCESS:
            own = role_url(settings.db.url, name, settings.db)
            cmd = f"env SIGNOFF_DB__URL={shlex.quote(own)} {cmd}"
        lines.append(f"{name}: {cmd}\n")
    return "".join(lines)


def _seed_once(state: Path, fresh_database: bool) -> dict[str, Any]:
    if state.exists() and not fresh_database:
        return dict(json.loads(state.read_text()))
    out = subprocess.run([SIGNOFF, "demo", "seed"], check=True, capture_output=True, text=True)
    state.write_text(out.stdout)
    return dict(json.loads(out.stdout))


def _wait_healthy(urls: dict[str, str], deadline_s: float) -> list[str]:
    pending = dict(urls)
    deadline = time.monotonic() + deadline_s
    while pending and time.monotonic() < deadline:
        for name, url in list(pending.items()):
            try:
                if httpx.get(url, timeout=1.0).status_code == 200:
                    del pending[name]
            except httpx.HTTPError:
                pass
        time.sleep(0.3)
    return sorted(pending)


def _banner(demo: dict[str, Any], table: dict[str, tuple[str, str]]) -> str:
    lines = ["", "signoff is running. Ctrl-C stops everything.", ""]
    for name, (_, url) in table.items():
        lines.append(f"  {name:<11} {url.removesuffix('/healthz')}")
    lines += ["", "Demo people (sign-in e-mail / password; tokens: signoff token --user EMAIL):"]
    for org in demo.get("organizations", []):
        lines.append(f"  {org['name']} ({org['id']})")
        for role, user in org["users"].items():
            lines.append(f"    {role:<8} {user['email']} / {user['password']}")
    lines += ["", "Walkthrough: README.md, section 'Try it'.", ""]
    return "\n".join(lines)


def read_env_file(path: Path) -> list[str]:
    """Set each of the file's variables the environment lacks (empty values skipped); the names
    set, in order."""
    if not path.is_file():
        return []
    found = [(k, v) for k, v in dotenv_values(path).items() if v and k not in os.environ]
    os.environ.update(found)
    return [k for k, _ in found]


@app.command()
def run(
    state_dir: Path = typer.Option(Path(".run"), help="Where local state is kept."),
    env_file: Path = typer.Option(Path(".env"), help="Variables to set where unset, if present."),
) -> None:
    """Set up the database and run every process until Ctrl-C."""
    if read := read_env_file(env_file):
        typer.echo(f"{env_file}: {len(read)} variables set (the environment's own win)")
    settings = load(ServiceSettings, "dev run")
    state_dir.mkdir(exist_ok=True)
    fresh = asyncio.run(ensure_database(settings.db.url))
    typer.echo(f"database {make_url(settings.db.url).database}: {'created' if fresh else 'exists'}")
    for line in migrate_all(settings):
        typer.echo(line)
    demo = _seed_once(state_dir / "demo.json", fresh)
    typer.echo(rabbit_users.apply(settings.amqp.prefix))
    table = processes()
    procfile = state_dir / "Procfile"
    procfile.write_text(procfile_lines(table, settings))
    honcho = subprocess.Popen(
        [str(Path(sys.executable).with_name("honcho")), "start", "-f", str(procfile), "-d", "."]
    )
    stop = lambda *_: honcho.send_signal(signal.SIGTERM)  # noqa: E731
    signal.signal(signal.SIGTERM, stop)
    try:
        unhealthy = _wait_healthy({n: u for n, (_, u) in table.items()}, 60.0)
        if unhealthy:
            typer.echo(f"not healthy after 60 s: {', '.join(unhealthy)} (see the logs above)")
        else:
            typer.echo(_banner(demo, table))
        sys.exit(honcho.wait())
    except KeyboardInterrupt:
        honcho.send_signal(signal.SIGINT)
        sys.exit(honcho.wait())
