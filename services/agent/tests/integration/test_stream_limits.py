"""Long-lived reads: an events stream closes once its person is no longer a member, and a
person may hold only a few streams open at once (a typed 429 beyond)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from agent_testkit import auth
from signoff_agent.settings import AgentGroup, AgentSettings
from signoff_club import tables as t
from signoff_runtime.settings import AmqpSettings, DatabaseSettings
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration
CHECK_S = 0.5
CAP = 2


@pytest.fixture
def settings(database_url: str, amqp_url: str, topology: Topology) -> AgentSettings:
    return AgentSettings(
        env="test",
        db=DatabaseSettings(url=database_url, pool_size=10),
        amqp=AmqpSettings(
            url=amqp_url,
            prefix=topology.prefix,
            delivery_limit=topology.delivery_limit,
            request_timeout_s=5.0,
        ),
        agent=AgentGroup(
            turn_sweep_s=0.3,
            stream_keepalive_s=0.5,
            stream_membership_check_s=CHECK_S,
            max_streams_per_person=CAP,
        ),
    )


async def _open(http: httpx.AsyncClient, club: dict[str, Any]) -> str:
    opened = await http.post(
        "/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=auth(club),
    )
    assert opened.status_code == 201, opened.text
    return str(opened.json()["id"])


async def test_a_stream_closes_once_its_person_is_no_longer_a_member(
    agent: httpx.AsyncClient, club: dict[str, Any], engine: AsyncEngine
) -> None:
    conversation = await _open(agent, club)
    url = f"/v1/conversations/{conversation}/events"
    async with agent.stream("GET", url, headers=auth(club)) as response:
        assert response.status_code == 200
        lines = response.aiter_lines()
        assert await anext(lines) == ": connected"
        # the control: a member's stream lives on past several checks
        kept = await asyncio.wait_for(_lines_for(lines, 4 * CHECK_S), 10)
        assert "event: closed" not in kept
        async with engine.begin() as conn:
            await conn.execute(
                t.memberships.delete().where(
                    t.memberships.c.user_id == club["users"]["manager"]["id"],
                    t.memberships.c.organization_id == club["id"],
                )
            )
        rest = await asyncio.wait_for(_rest(lines), 10 * CHECK_S + 5)
    assert "event: closed" in rest
    assert 'data: {"reason": "not_a_member"}' in rest
    # and it does not come back: the route itself refuses the former member
    again = await agent.get(url, headers=auth(club))
    assert again.status_code == 403


async def _lines_for(lines: Any, seconds: float) -> list[str]:
    seen: list[str] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        seen.append(await anext(lines))
    return seen


async def _rest(lines: Any) -> list[str]:
    return [line async for line in lines]


async def test_a_person_has_at_most_cap_streams_and_a_closed_one_frees_its_place(
    agent: httpx.AsyncClient, club: dict[str, Any], other_club: dict[str, Any]
) -> None:
    conversation = await _open(agent, club)
    url = f"/v1/conversations/{conversation}/events"
    async with agent.stream("GET", url, headers=auth(club)) as first:
        async with agent.stream("GET", url, headers=auth(club)) as second:
            assert (first.status_code, second.status_code) == (200, 200)
            # one line iterator each, kept: an abandoned one closes its connection
            held = [first.aiter_lines(), second.aiter_lines()]
            for lines in held:
                assert await asyncio.wait_for(anext(lines), 10) == ": connected"
            # (were it admitted, this would stream on: the deadline turns that into a failure)
            refused = await asyncio.wait_for(agent.get(url, headers=auth(club)), 10)
            assert refused.status_code == 429
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["code"] == "too_many_streams"
            assert refused.json()["limit"] == CAP
            assert int(refused.headers["retry-after"]) >= 1
            # per person: someone else still gets theirs
            theirs = await _open(agent, other_club)
            other_url = f"/v1/conversations/{theirs}/events"
            async with agent.stream("GET", other_url, headers=auth(other_club)) as other:
                assert other.status_code == 200
        # the second one closed: a new stream is admitted again (once the server saw it go)
        deadline = asyncio.get_running_loop().time() + 15
        while True:
            async with agent.stream("GET", url, headers=auth(club)) as third:
                if third.status_code == 200:
                    break
            assert asyncio.get_running_loop().time() < deadline, "the place was never freed"
            await asyncio.sleep(0.2)
