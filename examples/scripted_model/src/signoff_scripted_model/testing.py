"""Helpers for tests that drive the scripted model server as a real process.

``running_model_server`` starts ``python -m signoff_scripted_model`` on a free port and
waits for ``/healthz`` against a deadline; ``RunningModelServer.base_url`` is what an
``openai.AsyncOpenAI(base_url=...)`` (or the agent's ``OPENAI_BASE_URL``) needs;
``ModelAdmin`` wraps the test-only routes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionFunctionToolParam

_ENV_PREFIX = "SIGNOFF_MODEL_"


@dataclass(frozen=True)
class RunningModelServer:
    """A server process, where it listens and where it logs."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``…/v1``)."""
        return f"{self.url}/v1"

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
    """Start the server with ``SIGNOFF_MODEL_<NAME>=value`` per setting only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIX)}
    env.update({f"{_ENV_PREFIX}{name.upper()}": value for name, value in settings.items()})
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "signoff_scripted_model"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def wait_healthy(server: RunningModelServer, deadline_s: float = 20.0) -> None:
    """Poll ``/healthz`` until it answers; fail fast if the process dies first."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"scripted model server exited early:\n{server.log()}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=0.5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"scripted model server not healthy within {deadline_s}s:\n{server.log()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill if it will not go."""
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@contextmanager
def running_model_server(log_path: Path, **settings: str) -> Iterator[RunningModelServer]:
    """A healthy server on a free port for the duration of the block."""
    port = free_port()
    process = launch(log_path, host="127.0.0.1", port=str(port), **settings)
    server = RunningModelServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(process)


class ModelAdmin:
    """The test-only routes: request log, forced script, faults, reset."""

    def __init__(self, url: str, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.http = httpx.AsyncClient(base_url=url, timeout=5.0, transport=transport)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def reset(self) -> None:
        """Forget requests, faults and the forced script."""
        (await self.http.post("/_admin/reset")).raise_for_status()

    async def requests(self) -> list[dict[str, Any]]:
        """Every completion request so far: ``seq, body, stream, fault, script, status,
        response``."""
        items: list[dict[str, Any]] = (
            (await self.http.get("/_admin/requests")).raise_for_status().json()["items"]
        )
        return items

    async def force_script(self, name: str | None) -> None:
        """Answer every request with ``name``; None goes back to per-request selection."""
        (await self.http.post("/_admin/script", json={"script": name})).raise_for_status()

    async def set_fault(self, mode: str | None, count: int | None = 1, **options: Any) -> None:
        """Strike the next ``count`` requests (None = all) with ``mode``; None clears.
        Options: ``delay_ms``, ``retry_after_s``, ``garbage``."""
        body = {"mode": mode, "count": count, **options}
        (await self.http.post("/_admin/faults", json=body)).raise_for_status()

    async def faults(self) -> dict[str, Any]:
        """The rule, strikes left and strikes so far."""
        plan: dict[str, Any] = (await self.http.get("/_admin/faults")).raise_for_status().json()
        return plan


def strict_tool(
    name: str, description: str = "", **properties: dict[str, Any]
) -> ChatCompletionFunctionToolParam:
    """A ``strict`` function tool as a request's ``tools`` item: every property required,
    no others allowed — what the real API demands of strict schemas."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }
