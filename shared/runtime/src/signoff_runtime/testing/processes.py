"""Running signoff's real processes in tests: start, wait for health with a deadline, stop.

End-to-end tests and the benchmark start each service exactly as ``make run`` does (``signoff
serve NAME``), on free ports, pointed at their own database and queue prefix (``stack_env``).
Output goes to a log file per process so a failing test can show what the service said.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from signoff_runtime.roles import ACCESS, role_url
from signoff_runtime.settings import DatabaseSettings
from signoff_runtime.topology import Role

#: the services a whole stack runs, in the order they are started
SERVICES: tuple[Role, ...] = ("proposals", "executor", "reconciler", "agent")
#: timings shortened so a test sees a retry, an expiry or a reconciliation within seconds
QUICK_TIMINGS = {
    "SIGNOFF_CLUB_PROVIDER_TIMEOUT_S": "2",
    "SIGNOFF_CLUB_ATTEMPT_LEASE_S": "3",
    "SIGNOFF_RECONCILER__POLL_S": "0.2",
    "SIGNOFF_RECONCILER__BASE_BACKOFF_S": "0.5",
    "SIGNOFF_RECONCILER__MAX_BACKOFF_S": "2",
    "SIGNOFF_PROPOSALS__EXPIRY_INTERVAL_S": "0.5",
    "SIGNOFF_PROPOSALS__STATE_TOTALS_INTERVAL_S": "2",
}
#: a test's stack works on a few contracts at once; the default window (32) would size the
#: executor's pool to 35, and two workers' stacks share PostgreSQL's stock 100 connections with
#: the tests' own engines (``make test`` on a fresh machine)
TEST_WINDOW = {"SIGNOFF_EXECUTOR__CONCURRENCY": "8"}


def stack_env(
    database_url: str, amqp_url: str, prefix: str, *, quick: bool = True
) -> dict[str, str]:
    """The environment every process of one stack shares: its database, its broker and queue
    prefix; with ``quick`` (a test's stack), the ``QUICK_TIMINGS`` and the ``TEST_WINDOW`` (else
    each service's defaults)."""
    env = {
        "SIGNOFF_ENV": "test",
        "SIGNOFF_DB__URL": database_url,
        "SIGNOFF_DB__POOL_SIZE": "8",  # two stacks run side by side under make test
        "SIGNOFF_AMQP__URL": amqp_url,
        "SIGNOFF_AMQP__PREFIX": prefix,
        "SIGNOFF_AMQP__DELIVERY_LIMIT": "3",
        "SIGNOFF_LOG_LEVEL": "INFO",
        # stranded attempts are looked for each second: the benchmark's figures were measured so
        "SIGNOFF_RECONCILER__SCAN_INTERVAL_S": "1",
        "SIGNOFF_RECONCILER__STRANDED_AFTER_S": "1",
    }
    return env | QUICK_TIMINGS | TEST_WINDOW if quick else env


#: every port ``free_port`` handed out in this process
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free right now, never one handed out before in this process: the kernel may give
    a port just closed to the next ``bind(0)``, and two services of one stack were given the
    same port (the second failed to bind; its URL answered with the other's 404s)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


@dataclass
class ServiceProcess:
    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    log_dir: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def start(self) -> ServiceProcess:
        env = {**os.environ, **self.env}
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                self.argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited with {self.proc.returncode}:\n" + self.tail()
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not healthy after {timeout}s:\n" + self.tail())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Signal and wait. uvicorn re-raises SIGTERM after a clean shutdown, so a graceful stop
        returns ``-15``; the service's own ``service.stopped`` log line tells clean from not."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def kill(self) -> None:
        """``kill -9``: no shutdown hook runs (fault tests)."""
        self.stop(signal.SIGKILL)

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def as_own_role(env: dict[str, str], name: str) -> dict[str, str]:
    """``env`` with ``SIGNOFF_DB__URL`` turned into service ``name``'s own database role (as
    deployed: ``signoff_runtime.roles``); unchanged for a process without a role."""
    if name not in ACCESS or "SIGNOFF_DB__URL" not in env:
        return dict(env)
    db = DatabaseSettings(role_prefix=env.get("SIGNOFF_DB__ROLE_PREFIX", "signoff"))
    return {**env, "SIGNOFF_DB__URL": role_url(env["SIGNOFF_DB__URL"], name, db)}


def service(
    name: str, env: dict[str, str], log_dir: Path, port: int | None = None
) -> ServiceProcess:
    """``signoff serve NAME`` on a free port (its port variable set accordingly)."""
    port = port or free_port()
    env = {**env, f"SIGNOFF_{name.upper()}__PORT": str(port)}
    argv = [sys.executable, "-c", "from signoff_cli.main import main; main()", "serve", name]
    return ServiceProcess(name, argv, env, port, log_dir)


def provider(env: dict[str, str], log_dir: Path, port: int | None = None) -> ServiceProcess:
    port = port or free_port()
    env = {**env, "SIGNOFF_CARD_PROVIDER_PORT": str(port)}
    return ServiceProcess(
        "provider", [sys.executable, "-m", "signoff_card_provider"], env, port, log_dir
    )
