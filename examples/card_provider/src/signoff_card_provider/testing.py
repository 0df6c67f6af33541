"""Helpers for tests that drive the simulator as a real process (ours and the domain's).

``running_simulator`` starts ``python -m signoff_card_provider`` on a free port and waits
for ``/healthz`` against a deadline; ``SimulatorAdmin`` wraps the test-only routes;
``eventually`` waits on a condition with a deadline instead of sleeping and hoping.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

_ENV_PREFIX = "SIGNOFF_CARD_PROVIDER_"


@dataclass(frozen=True)
class RunningSimulator:
    """A simulator process, where it listens and where it logs."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        """Everything the process wrote so far (stdout and stderr)."""
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    """A port free right now (another process could still take it: rare enough here)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def launch(log_path: Path, **settings: str) -> subprocess.Popen[bytes]:
    """Start the simulator with ``SIGNOFF_CARD_PROVIDER_<NAME>=value`` per setting only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIX)}
    env.update({f"{_ENV_PREFIX}{name.upper()}": value for name, value in settings.items()})
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "signoff_card_provider"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def wait_healthy(simulator: RunningSimulator, deadline_s: float = 20.0) -> None:
    """Poll ``/healthz`` until it answers; fail fast if the process dies first."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if simulator.process.poll() is not None:
            raise RuntimeError(f"simulator exited early:\n{simulator.log()}")
        try:
            if httpx.get(f"{simulator.url}/healthz", timeout=0.5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"simulator not healthy within {deadline_s}s:\n{simulator.log()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill if it will not go."""
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@contextmanager
def running_simulator(log_path: Path, **settings: str) -> Iterator[RunningSimulator]:
    """A healthy simulator on a free port for the duration of the block."""
    port = free_port()
    process = launch(log_path, host="127.0.0.1", port=str(port), **settings)
    simulator = RunningSimulator(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_healthy(simulator)
        yield simulator
    finally:
        stop(process)


class SimulatorAdmin:
    """The test-only routes: script faults, move the clock, reset; and the ledger."""

    def __init__(self, base_url: str, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.http = httpx.AsyncClient(base_url=base_url, timeout=5.0, transport=transport)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def set_faults(self, **config: Any) -> None:
        """``rules=[...]`` and/or ``probabilities={...}, delay_ms=n, seed=s``; none clears."""
        (await self.http.post("/_admin/faults", json=config)).raise_for_status()

    async def fault_history(self) -> list[dict[str, Any]]:
        """Every fault injected since the plan was set."""
        body = (await self.http.get("/_admin/faults")).raise_for_status().json()
        history: list[dict[str, Any]] = body["history"]
        return history

    async def advance_clock(self, seconds: float) -> None:
        """Move the simulated clock forward."""
        body = {"advance_seconds": seconds}
        (await self.http.post("/_admin/clock", json=body)).raise_for_status()

    async def reset(self) -> None:
        """Forget everything."""
        (await self.http.post("/_admin/reset")).raise_for_status()

    async def ledger(self) -> dict[str, Any]:
        """Effects, effects per key, request counts, keys in flight."""
        ledger: dict[str, Any] = (await self.http.get("/v1/ledger")).raise_for_status().json()
        return ledger


async def eventually(check: Callable[[], Awaitable[bool]], deadline_s: float = 5.0) -> None:
    """Wait until ``check()`` holds; fail after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {deadline_s}s")
        await asyncio.sleep(0.02)
