"""The ``signoff`` command as an operator meets it: ``--version``, ``serve``'s help, one line for
a bad setting in every command, ``db wait``, and ``dev run``'s ``.env``."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from unittest.mock import patch

import asyncpg
import pytest
from signoff_cli import dev, main
from signoff_runtime.db import asyncpg_dsn
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> object:
    if not any(group.name == "proposals" for group in main.app.registered_groups):
        main.mount_plugins()
    return main.app


def test_version(app: object) -> None:
    result = runner.invoke(main.app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"signoff {version('signoff-cli')}"


def test_serve_lists_every_installed_service(app: object) -> None:
    result = runner.invoke(main.app, ["serve", "--help"], env={"COLUMNS": "200"})
    for service in ("agent", "executor", "proposals", "reconciler", "web"):
        assert service in result.stdout


#: every command that reads settings, with arguments that would get it past its parsing
COMMANDS = [
    ["token", "--user", "someone@example.com"],
    ["db", "create"],
    ["db", "migrate"],
    ["db", "wait", "executor", "--timeout", "1"],
    ["status"],
    ["dev", "run", "--env-file", "/nonexistent/.env"],
    ["proposals", "show", "prp_x"],
    ["proposals", "stuck"],
    ["reconcile", "prp_x"],
    ["dlq", "list"],
    ["dlq", "show", "1"],
    ["dlq", "replay", "1"],
    ["demo", "seed"],
    ["web", "revoke-sessions", "--user", "usr_x"],
    ["serve", "agent"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_bad_setting_is_one_line_not_a_traceback(app: object, argv: list[str]) -> None:
    result = runner.invoke(main.app, argv, env={"SIGNOFF_DB__POOL_SIZE": "0", "SIGNOFF_ENV": "dev"})
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("signoff ") and "SIGNOFF_DB__POOL_SIZE" in line, line


def test_db_commands_read_only_the_database_settings(app: object) -> None:
    """What the migration Job is given: no broker, and production everywhere else too."""
    result = runner.invoke(
        main.app,
        ["db", "wait", "no_such_owner", "--timeout", "1"],
        env={"SIGNOFF_ENV": "prod", "SIGNOFF_AMQP__URL": "amqp://guest:guest@127.0.0.1/"},
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == "signoff db wait: no migrations installed for no_such_owner\n"


def test_db_wait_holds_until_the_schemas_are_migrated(app: object, database_url: str) -> None:
    done = runner.invoke(
        main.app, ["db", "wait", "--timeout", "5"], env={"SIGNOFF_DB__URL": database_url}
    )
    assert done.exit_code == 0, done.output
    empty = make_url(database_url).set(database=f"signoff_wait_{secrets.token_hex(4)}")
    url = empty.render_as_string(hide_password=False)
    asyncio.run(_create(url))
    try:
        waiting = runner.invoke(
            main.app, ["db", "wait", "executor", "--timeout", "1"], env={"SIGNOFF_DB__URL": url}
        )
        assert waiting.exit_code == 1
        assert "executor: at nothing, newest" in waiting.stderr
    finally:
        asyncio.run(_drop(url))


async def _create(url: str) -> None:
    admin = await asyncpg.connect(
        asyncpg_dsn(make_url(url).set(database="postgres").render_as_string(False))
    )
    try:
        await admin.execute(f'CREATE DATABASE "{make_url(url).database}"')
    finally:
        await admin.close()


async def _drop(url: str) -> None:
    admin = await asyncpg.connect(
        asyncpg_dsn(make_url(url).set(database="postgres").render_as_string(False))
    )
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')
    finally:
        await admin.close()


def test_dev_run_reads_env_file_where_the_environment_is_silent(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "SIGNOFF_LOG_LEVEL=DEBUG\nSIGNOFF_AGENT__PORT=9001\nSIGNOFF_WEB__SECURE_COOKIES=\n"
        'SIGNOFF_AUTH__PUBLIC_KEYS={"k": "v"}\n'
    )
    read = ("SIGNOFF_LOG_LEVEL", "SIGNOFF_WEB__SECURE_COOKIES", "SIGNOFF_AUTH__PUBLIC_KEYS")
    with patch.dict(os.environ):  # the whole environment restored afterwards
        for name in read:
            os.environ.pop(name, None)
        os.environ["SIGNOFF_AGENT__PORT"] = "8001"
        assert dev.read_env_file(env_file) == ["SIGNOFF_LOG_LEVEL", "SIGNOFF_AUTH__PUBLIC_KEYS"]
        assert os.environ["SIGNOFF_LOG_LEVEL"] == "DEBUG"
        assert os.environ["SIGNOFF_AGENT__PORT"] == "8001", "the environment's own value wins"
        assert os.environ["SIGNOFF_AUTH__PUBLIC_KEYS"] == '{"k": "v"}'
        assert "SIGNOFF_WEB__SECURE_COOKIES" not in os.environ, "empty is unset"
        assert dev.read_env_file(tmp_path / "missing") == []


def test_a_service_process_imports_no_other_command_no_alembic_no_rich() -> None:
    """``signoff serve`` runs one service: the other packages' command groups, Alembic (only
    migrations need it) and rich (structlog's terminal tracebacks) stay out of its memory."""
    code = (
        "import sys\n"
        "sys.argv[1:] = ['serve', '--help']\n"
        "from signoff_cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "unwanted = ('rich', 'alembic', 'signoff_web', 'signoff_club.cli',"
        " 'signoff_proposals.cli')\n"
        "print('imported:', sorted(name for name in unwanted if sys.modules.get(name)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Usage" in done.stdout, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "imported: []", done.stdout


#: what a service's process must not import: other commands' modules (typer among them), what
#: only a terminal or a WebSocket would use, pydantic.v1, which only FastAPI's check for such
#: models would load, SQLAlchemy's ORM (``signoff_runtime.engine_only``), zstandard, which
#: httpx would load only to offer zstd, and cryptography (≈ 8 MB), which PyJWT would load for
#: algorithms only an external issuer's tokens need (``signoff_cli`` and each service's ``serve``)
NOT_IN_A_SERVICE = (
    "typer",
    "shellingham",
    "signoff_cli.commands",
    "signoff_cli.database",
    "signoff_cli.dev",
    "signoff_cli.docs",
    "signoff_cli.status",
    "signoff_runtime.testing",
    "signoff_bench",
    "alembic",
    "rich",
    "pygments",
    "websockets",
    "pydantic.v1",
    "sqlalchemy.orm",
    "zstandard",
    "cryptography",
)


#: what one service does not load to start, on top of ``NOT_IN_A_SERVICE`` (issue 18): PyJWT where
#: no route checks a token, PyNaCl where neither a token nor a contract is checked
#: (``signoff_runtime.keys``, ``signoff_runtime.audiences``), aiosmtplib until an e-mail is sent,
#: FastAPI (≈ 5 MB) where there is no API, only probes and the scrape
NOT_IN = {
    "agent": (),
    "proposals": ("aiosmtplib",),
    "executor": ("jwt", "signoff_runtime.tokens", "fastapi"),
    "reconciler": ("jwt", "signoff_runtime.tokens", "nacl", "fastapi"),
}


def _serve_and_list(service: str, unwanted: tuple[str, ...], **env: str) -> tuple[str, str]:
    """The whole of ``signoff serve NAME`` up to the server's start (``uvicorn.run`` recorded, not
    run: no connection is made); then the ``ws`` it was given and which of ``unwanted`` is in
    ``sys.modules``."""
    code = (
        "import sys\n"
        "import uvicorn\n"
        "calls = []\n"
        "uvicorn.run = lambda app, **kw: calls.append(kw)\n"
        f"sys.argv[1:] = ['serve', {service!r}]\n"
        "from signoff_cli.main import main\n"
        "main()\n"
        f"unwanted = {unwanted!r}\n"
        "print('ws:', [kw.get('ws') for kw in calls])\n"
        "print('imported:', sorted(name for name in unwanted if sys.modules.get(name)))\n"
    )
    env = {**os.environ, "SIGNOFF_ENV": "test", "SIGNOFF_LOG_LEVEL": "WARNING", **env}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    *_, ws, imported = done.stdout.strip().splitlines()
    return ws, imported


@pytest.mark.parametrize("service", ["agent", "proposals", "executor", "reconciler"])
def test_signoff_serve_builds_the_service_without_the_command_line(service: str) -> None:
    ws, imported = _serve_and_list(service, NOT_IN_A_SERVICE + NOT_IN[service])
    assert ws == "ws: ['none']"
    assert imported == "imported: []"


def test_with_an_external_issuer_a_service_loads_cryptography_its_x509_deferred() -> None:
    """RS256 and ES256 (``SIGNOFF_AUTH__JWKS_URL``) are cryptography's: PyJWT loads it, and its
    X.509 package (certificates, which signoff never reads) is imported deferred, not run
    (``signoff_runtime.deferred``)."""
    url = "https://idp.example/.well-known/jwks.json"
    unwanted = ("cryptography", "cryptography.x509.base", "nacl")
    _, imported = _serve_and_list("proposals", unwanted, SIGNOFF_AUTH__JWKS_URL=url)
    assert imported == "imported: ['cryptography', 'nacl']"
