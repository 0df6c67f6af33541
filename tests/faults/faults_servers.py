"""The fault suite's own PostgreSQL cluster and RabbitMQ node, on spare ports.

Killing the machine's PostgreSQL or RabbitMQ would disturb everyone else's tests (and ``make
run``), so the fault suite starts a private cluster (``initdb`` in a temporary directory) and a
private broker node (its own node name, ports, data and log directories) once per session, and
kills, crashes and restarts only those. Run as root (CI, these machines), each server runs as
its own system user (``postgres``, ``rabbitmq``), as ``shared/notes/dependencies.md`` describes:
root-owned directories make the broker fail silently. If either cannot start, ``ServerFailed``
says why, with the server's last log lines.

``SIGNOFF_FAULTS_PG_BIN`` and ``SIGNOFF_FAULTS_RABBITMQ_BIN`` name the binaries' directories
where ``pg_config`` or the Debian layout does not find them.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import asyncpg
from signoff_runtime.migrations import upgrade_all
from signoff_runtime.testing.processes import free_port
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

AMQP_HEADER = b"AMQP\x00\x00\x09\x01"


class ServerFailed(RuntimeError):
    """A private server would not start (or stop) as asked."""


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _as_user(user: str, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """``argv`` run as ``user`` when we are root (with ``env`` set), else as ourselves."""
    assignments = [f"{name}={value}" for name, value in (env or {}).items()]
    if os.geteuid() == 0:
        return ["runuser", "-u", user, "--", "env", *assignments, *argv]
    return ["env", *assignments, *argv]


def _owned_dir(user: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"signoff-faults-{user}-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    return root


def _run(argv: list[str], what: str, log: Path | None = None, timeout: float = 120) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerFailed(f"{what}: {exc}") from exc
    if done.returncode != 0:
        tail = _tail(log) if log is not None else ""
        raise ServerFailed(f"{what} exited {done.returncode}: {done.stderr.strip()}\n{tail}")
    return done.stdout


def _pg_bin() -> Path:
    if configured := os.environ.get("SIGNOFF_FAULTS_PG_BIN"):
        return Path(configured)
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if (Path(found) / "initdb").exists():
            return Path(found)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not candidates:
        raise ServerFailed("no initdb found: set SIGNOFF_FAULTS_PG_BIN to PostgreSQL's bin dir")
    return Path(candidates[-1]).parent


class PrivatePostgres:
    """A throw-away cluster: ``start``, ``crash`` (immediate mode), ``start`` again, ``stop``."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.root = _owned_dir("postgres")
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.crashes = 0

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> list[str]:
        return _as_user("postgres", [str(self.bin / "pg_ctl"), "-D", str(self.data), *args])

    def start(self) -> PrivatePostgres:
        if not self.data.exists():
            initdb = [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust"]
            _run(
                _as_user("postgres", [*initdb, "-U", "postgres", "-E", "UTF8", "--no-sync"]),
                "initdb",
            )
        # fsync off: crashes here are process crashes (the page cache survives them)
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=300"
        )
        _run(
            self._ctl("-l", str(self.log), "-o", options, "-w", "-t", "60", "start"),
            "pg_ctl start",
            self.log,
        )
        return self

    def crash(self) -> None:
        """``pg_ctl -m immediate stop``: every backend dies without a checkpoint."""
        _run(self._ctl("-m", "immediate", "-w", "stop"), "pg_ctl stop -m immediate", self.log)
        self.crashes += 1

    def stop(self) -> None:
        with contextlib.suppress(ServerFailed):
            _run(self._ctl("-m", "fast", "-w", "stop"), "pg_ctl stop", self.log)
        shutil.rmtree(self.root, ignore_errors=True)


def _rabbit_bin() -> Path:
    if configured := os.environ.get("SIGNOFF_FAULTS_RABBITMQ_BIN"):
        return Path(configured)
    debian = Path("/usr/lib/rabbitmq/bin")
    if (debian / "rabbitmq-server").exists():
        return debian
    found = shutil.which("rabbitmq-server")
    if found is None:
        raise ServerFailed("no rabbitmq-server: set SIGNOFF_FAULTS_RABBITMQ_BIN")
    return Path(found).parent


def _amqp_ready(port: int) -> bool:
    """The node speaks AMQP: it answers the protocol header with a Connection.Start frame."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(AMQP_HEADER)
            return sock.recv(1) == b"\x01"
    except OSError:
        return False


class PrivateRabbit:
    """A RabbitMQ node of our own: ``start``, ``kill`` (SIGKILL), ``start`` again, ``stop``."""

    def __init__(self) -> None:
        self.bin = _rabbit_bin()
        self.root = _owned_dir("rabbitmq")
        self.node = f"signoff-faults-{secrets.token_hex(3)}@localhost"
        self.port, self.dist_port = free_port(), free_port()
        self.log = self.root / "console.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0
        (self.root / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        (self.root / "enabled_plugins").write_text("[].\n")
        for sub in ("mnesia", "log"):
            (self.root / sub).mkdir()
        if os.geteuid() == 0:
            entry = pwd.getpwnam("rabbitmq")
            for path in self.root.rglob("*"):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def _env(self) -> dict[str, str]:
        home = pwd.getpwnam("rabbitmq").pw_dir if os.geteuid() == 0 else os.environ["HOME"]
        return {
            "HOME": home,  # the shared Erlang cookie lets rabbitmqctl reach the node
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.root / "log"),
        }

    def start(self, timeout: float = 90.0) -> PrivateRabbit:
        argv = _as_user("rabbitmq", [str(self.bin / "rabbitmq-server")], self._env())
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while not _amqp_ready(self.port):
            if self.proc.poll() is not None:
                raise ServerFailed(
                    f"rabbitmq-server exited {self.proc.returncode}:\n{_tail(self.log)}"
                )
            if time.monotonic() > deadline:
                raise ServerFailed(f"rabbitmq not ready after {timeout}s:\n{_tail(self.log)}")
            time.sleep(0.2)
        return self

    def kill(self) -> None:
        """SIGKILL the node's whole process group: no shutdown, no flush."""
        self._signal(signal.SIGKILL, 10)
        self.kills += 1

    def _signal(self, sig: int, wait_s: float) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        deadline = time.monotonic() + 10
        while _amqp_ready(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)  # the group leader is gone; the VM follows within moments

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """``rabbitmqctl -n NODE ARGS`` (the node's own tools: no management plugin here)."""
        argv = _as_user(
            "rabbitmq",
            [str(self.bin / "rabbitmqctl"), "-n", self.node, *args],
            {"HOME": self._env()["HOME"]},
        )
        return _run(argv, f"rabbitmqctl {args[0]}", timeout=timeout)

    def stop(self) -> None:
        self._signal(signal.SIGTERM, 30)
        shutil.rmtree(self.root, ignore_errors=True)


async def signoff_database(pg: PrivatePostgres) -> tuple[str, AsyncEngine]:
    """A fresh ``signoff`` database on ``pg``, migrated: its URL and an engine on it."""
    admin = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{pg.port}/postgres")
    try:
        await admin.execute("CREATE DATABASE signoff")
    finally:
        await admin.close()
    db_url = f"postgresql+asyncpg://postgres@127.0.0.1:{pg.port}/signoff"
    await asyncio.to_thread(upgrade_all, db_url)
    return db_url, create_async_engine(db_url, pool_size=10, pool_pre_ping=True)
