"""Fixtures for the club's tests (the conformance kit reuses ``refund_world`` and
``broadcast_world``; builders and helpers are in ``signoff_club.testing``).

``card_provider`` is the simulator as a real process (``python -m signoff_card_provider`` on
a free port), one per session; ``provider_admin`` clears any faults a test scripted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from signoff_card_provider.client import CardProviderClient
from signoff_card_provider.testing import RunningSimulator, SimulatorAdmin, running_simulator
from signoff_club import testing
from signoff_club.settings import ClubSettings
from signoff_club.testing import BroadcastWorld, RefundWorld
from sqlalchemy.ext.asyncio import AsyncEngine


@pytest.fixture(scope="session")
def card_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSimulator]:
    log_path = tmp_path_factory.mktemp("club_card_provider") / "simulator.log"
    with running_simulator(log_path, retention_seconds="3600") as simulator:
        yield simulator


@pytest.fixture
def club_settings(card_provider: RunningSimulator) -> ClubSettings:
    return ClubSettings(provider_url=card_provider.url, provider_timeout_s=2.0)


@pytest.fixture
async def provider(club_settings: ClubSettings) -> AsyncIterator[CardProviderClient]:
    async with CardProviderClient(club_settings.provider_url, timeout_s=2.0) as client:
        yield client


@pytest.fixture
async def provider_admin(card_provider: RunningSimulator) -> AsyncIterator[SimulatorAdmin]:
    admin = SimulatorAdmin(card_provider.url)
    yield admin
    await admin.set_faults()
    await admin.aclose()


@pytest.fixture
async def refund_world(engine: AsyncEngine) -> RefundWorld:
    """One club with a card-paid order owing a 10 % discount (3 500 of 34 999 cents), and a
    second club; the request asks for account credit (no provider needed)."""
    return await testing.refund_world(engine)


@pytest.fixture
async def broadcast_world(engine: AsyncEngine) -> BroadcastWorld:
    """One club with an empty broadcast form and two overlapping segments (3 people), and a
    second club."""
    return await testing.broadcast_world(engine)
