"""Fixtures running the simulator as a real process, as the domain's tests will meet it.

One process per session (started with ``python -m signoff_card_provider`` on a free port,
waited for on ``/healthz`` with a deadline, stopped at the end); every test gets it reset.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest
from signoff_card_provider.client import CardProviderClient
from signoff_card_provider.testing import RunningSimulator, SimulatorAdmin, running_simulator


@pytest.fixture(scope="session")
def retention_seconds() -> int:
    """The session simulator's idempotency window."""
    return 3600


@pytest.fixture(scope="session")
def simulator(
    tmp_path_factory: pytest.TempPathFactory, retention_seconds: int
) -> Iterator[RunningSimulator]:
    log_path = tmp_path_factory.mktemp("card_provider") / "simulator.log"
    with running_simulator(log_path, retention_seconds=str(retention_seconds), seed="1") as sim:
        yield sim
        log = sim.log()
    assert "Traceback" not in log, log  # drops and bad input must not crash anything


@dataclass(frozen=True)
class Clients:
    """Connections kept for the whole session: creating clients per test costs more than
    the tests themselves."""

    admin: SimulatorAdmin
    provider: CardProviderClient
    raw: httpx.AsyncClient


@pytest.fixture(scope="session")
async def session_clients(simulator: RunningSimulator) -> AsyncIterator[Clients]:
    admin = SimulatorAdmin(simulator.url)
    async with (
        CardProviderClient(simulator.url, timeout_s=5.0) as provider,
        httpx.AsyncClient(base_url=simulator.url, timeout=5) as raw,
    ):
        yield Clients(admin, provider, raw)
    await admin.aclose()


@pytest.fixture
async def clients(session_clients: Clients) -> Clients:
    """The session's clients, with the simulator reset so each test starts from nothing."""
    await session_clients.admin.reset()
    return session_clients


@pytest.fixture
def provider_url(clients: Clients, simulator: RunningSimulator) -> str:
    return simulator.url


@pytest.fixture
def admin(clients: Clients) -> SimulatorAdmin:
    return clients.admin


@pytest.fixture
def provider(clients: Clients) -> CardProviderClient:
    return clients.provider


@pytest.fixture
def raw(clients: Clients) -> httpx.AsyncClient:
    """Plain HTTP, for tests that look at headers and bodies on the wire."""
    return clients.raw


@pytest.fixture
def key() -> str:
    """A fresh idempotency key, as the executor would derive one from a proposal id."""
    return f"proposal-{uuid.uuid4().hex}"
