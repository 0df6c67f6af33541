"""NUL characters and the size limit hold for every body, whatever its ``Content-Type`` says.

Each HTTP service (agent, proposals, web) is built from its real ``create_app`` on this test's
database and broker names, and sent bodies a handler could still decode: ``text/plain`` and
``application/octet-stream`` with a NUL byte, JSON with a ``\\u0000`` escape declared in capitals
or not declared at all (FastAPI parses both as JSON), a mis-cased form with ``%00``, and bodies
over ``SIGNOFF_LIMITS__MAX_BODY_BYTES``. Each gets a 4xx problem document, never a 500 and never
the route. A clean body of the same shape reaches the route (the control: the refusals are the
limits', not the route's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from signoff_agent.app import create_app as agent_app
from signoff_agent.settings import AgentSettings
from signoff_club.seed import seed_organization
from signoff_proposals.app import create_app as proposals_app
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import (
    AmqpSettings,
    AuthSettings,
    DatabaseSettings,
    LimitsSettings,
)
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import Topology
from signoff_web.app import create_app as web_app
from signoff_web.settings import WebSettings
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration

MAX = 4096


@pytest_asyncio.fixture(loop_scope="session")
async def club(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.begin() as conn:
        return await seed_organization(conn)


def _common(database_url: str, amqp_url: str, topology: Topology) -> dict[str, Any]:
    return {
        "env": "test",
        "db": DatabaseSettings(url=database_url, pool_size=2),
        "amqp": AmqpSettings(url=amqp_url, prefix=topology.prefix),
        "limits": LimitsSettings(max_body_bytes=MAX),
    }


@pytest_asyncio.fixture(loop_scope="session", params=["agent", "proposals", "web"])
async def service(
    request: pytest.FixtureRequest, database_url: str, amqp_url: str, topology: Topology
) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    common = _common(database_url, amqp_url, topology)
    app: FastAPI
    if request.param == "agent":
        app = agent_app(AgentSettings(**common))
    elif request.param == "proposals":
        app = proposals_app(ProposalsSettings(**common))
    else:
        app = web_app(WebSettings(**common))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield request.param, client
    # its lifespan never ran; left to the garbage collector, an open pooled connection failed
    # whichever test was running
    await app.state.runtime.engine.dispose()


#: a route of each service that reads a body (and would store its text)
ROUTES = {
    "agent": "/v1/conversations",
    "proposals": "/v1/proposals/prp_nothing/decline",
    "web": "/signin",
}


def _headers(club: dict[str, Any], content_type: str | None) -> dict[str, str]:
    token = issue_token(AuthSettings(), club["users"]["manager"]["id"], club["id"])
    headers = {"Authorization": f"Bearer {token}"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return headers


#: a body each route would otherwise accept, its text holding a JSON-escaped NUL
JSON_NUL = {
    "agent": b'{"section": "orders", "resource_id": "ord_x\\u0000"}',
    "proposals": b'{"reason": "x\\u0000"}',
    "web": b'{"email": "a\\u0000", "password": "x"}',
}
JSON = b"json"
REFUSED_NUL: list[tuple[str | None, bytes]] = [
    ("text/plain", b"hello\x00world"),
    ("application/octet-stream", b"\x00\x01\x02"),
    ("APPLICATION/JSON", JSON),
    (None, JSON),
    ("text/plain", JSON),
    ("Application/X-WWW-Form-Urlencoded", b"email=a%00b&password=x"),
    ("text/plain", b"email=a%00b&password=x"),
]


@pytest.mark.parametrize(("content_type", "body"), REFUSED_NUL)
async def test_a_body_holding_nul_is_422_whatever_its_type(
    service: tuple[str, httpx.AsyncClient],
    club: dict[str, Any],
    content_type: str | None,
    body: bytes,
) -> None:
    name, client = service
    body = JSON_NUL[name] if body == JSON else body
    sent = await client.post(ROUTES[name], content=body, headers=_headers(club, content_type))
    assert sent.status_code == 422, (name, sent.status_code, sent.text[:200])
    assert sent.headers["content-type"] == "application/problem+json"
    assert sent.json()["code"] == "invalid_request"


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", None])
async def test_a_body_over_the_limit_is_413_whatever_its_type(
    service: tuple[str, httpx.AsyncClient], club: dict[str, Any], content_type: str | None
) -> None:
    name, client = service
    headers = _headers(club, content_type)
    declared = await client.post(ROUTES[name], content=b"x" * (MAX + 1), headers=headers)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX // 512 + 2):
            yield b"y" * 512

    streamed = await client.post(ROUTES[name], content=chunks(), headers=headers)
    for refused in (declared, streamed):
        assert refused.status_code == 413, (name, refused.status_code, refused.text[:200])
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["code"] == "payload_too_large"
        assert refused.json()["max_bytes"] == MAX


CLEAN = {
    "agent": (b'{"section": "orders", "resource_id": "ord_unknown"}', 404),
    "proposals": (b'{"reason": "50%00 off is not a NUL"}', 404),
    "web": (b"email=nobody%40club.example&password=wrong", 401),
}


async def test_the_control_a_clean_body_reaches_the_route(
    service: tuple[str, httpx.AsyncClient], club: dict[str, Any]
) -> None:
    name, client = service
    body, expected = CLEAN[name]
    kind = "application/x-www-form-urlencoded" if name == "web" else "application/json"
    sent = await client.post(ROUTES[name], content=body, headers=_headers(club, kind))
    assert sent.status_code == expected, (name, sent.status_code, sent.text[:200])
