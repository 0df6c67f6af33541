"""Sign-in and sessions on the real database: revocable sessions, rate limits, old hashes.

The web is built by its own ``create_app`` (its directory from the ``signoff.directory`` entry
point) and called in-process; every session row, hash and membership is PostgreSQL's.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio
from signoff_club import tables as t
from signoff_club.passwords import scrypt_hash
from signoff_club.seed import seed_organization
from signoff_runtime.settings import AmqpSettings, DatabaseSettings, UnsafeSettings
from signoff_runtime.topology import Topology
from signoff_web import session_store, sessions
from signoff_web.app import create_app
from signoff_web.sections import Catalogue
from signoff_web.settings import WebGroup, WebSettings
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration
Client = Callable[..., httpx.AsyncClient]


@pytest_asyncio.fixture(loop_scope="session")
async def club(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.begin() as conn:
        return await seed_organization(conn)


@pytest_asyncio.fixture(loop_scope="session")
async def build(
    database_url: str, amqp_url: str, topology: Topology
) -> AsyncIterator[Callable[..., Any]]:
    """``build(**web)``: the web app, its lifespan not run; its engine's pool closed at the end
    (left to the garbage collector, an open connection failed whichever test was running)."""
    built: list[Any] = []

    def _build(unsafe: UnsafeSettings | None = None, **web: Any) -> Any:
        settings = WebSettings(
            env="test",
            db=DatabaseSettings(url=database_url, pool_size=2),
            amqp=AmqpSettings(url=amqp_url, prefix=topology.prefix),
            web=WebGroup(**web),
            unsafe=unsafe or UnsafeSettings(),
        )
        app = create_app(settings)
        # no agent runs here: the home page lists no section (as an agent serving none would)
        app.state.catalogue = Catalogue(app.state.apis, 3600.0, [], time.monotonic())
        built.append(app)
        return app

    yield _build
    for app in built:
        await app.state.runtime.engine.dispose()


@pytest_asyncio.fixture(loop_scope="session")
async def client(build: Callable[..., Any]) -> AsyncIterator[Client]:
    """``client(app, address)``: a browser at ``address`` that keeps no cookies of its own."""
    opened: list[httpx.AsyncClient] = []

    def _client(app: Any, address: str = "192.0.2.1") -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(address, 40000))
        made = httpx.AsyncClient(transport=transport, base_url="http://web")
        opened.append(made)
        return made

    yield _client
    for made in opened:
        await made.aclose()


async def _sign_in(
    http: httpx.AsyncClient, user: dict[str, Any], password: str | None = None
) -> httpx.Response:
    form = {"email": user["email"], "password": password or user["password"]}
    return await http.post("/signin", data=form)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def _signed_in_cookie(http: httpx.AsyncClient, user: dict[str, Any]) -> str:
    response = await _sign_in(http, user)
    assert response.status_code == 303, response.text
    return str(response.cookies[sessions.COOKIE])


def _as(cookie: str) -> dict[str, str]:
    return {"Cookie": f"{sessions.COOKIE}={cookie}"}


async def test_sign_out_revokes_the_session_and_a_replayed_cookie_is_refused(
    build: Callable[..., Any], client: Client, club: dict[str, Any]
) -> None:
    http = client(build())
    cookie = await _signed_in_cookie(http, club["users"]["manager"])
    home = await http.get("/", headers=_as(cookie))
    assert home.status_code == 200
    out = await http.post("/signout", data={"csrf": _csrf(home.text)}, headers=_as(cookie))
    assert out.status_code == 303 and out.headers["location"] == "/signin"
    # the same cookie, replayed (a copy kept by whoever saw it): no session any more
    page = await http.get("/", headers=_as(cookie))
    assert page.status_code == 303 and page.headers["location"] == "/signin"
    form = await http.post(
        "/orders/ord_x/chat", data={"csrf": _csrf(home.text)}, headers=_as(cookie)
    )
    assert form.status_code == 401


async def test_the_negative_control_without_revocation_the_replayed_cookie_still_works(
    build: Callable[..., Any], client: Client, club: dict[str, Any]
) -> None:
    http = client(build(UnsafeSettings(no_session_revocation=True)))
    cookie = await _signed_in_cookie(http, club["users"]["manager"])
    home = await http.get("/", headers=_as(cookie))
    await http.post("/signout", data={"csrf": _csrf(home.text)}, headers=_as(cookie))
    assert (await http.get("/", headers=_as(cookie))).status_code == 200


async def test_a_validly_signed_cookie_without_a_live_row_is_no_session(
    build: Callable[..., Any], client: Client, club: dict[str, Any], engine: AsyncEngine
) -> None:
    """A cookie made with the web's own secret but never started (or whose row an operator
    revoked) is refused: the signature is not enough."""
    app = build()
    http = client(app)
    manager = club["users"]["manager"]
    secret = app.state.settings.web.session_secret.get_secret_value()
    member = await _membership(engine, manager["id"], club["id"])
    unstarted = sessions.dump(sessions.Session.start(member, 600), secret)
    assert (await http.get("/", headers=_as(unstarted))).status_code == 303

    first = await _signed_in_cookie(http, manager)
    second = await _signed_in_cookie(client(app, "192.0.2.2"), manager)
    assert (await http.get("/", headers=_as(second))).status_code == 200
    assert await session_store.revoke_person(app.state.runtime.engine, manager["id"]) >= 2
    for cookie in (first, second):
        assert (await http.get("/", headers=_as(cookie))).status_code == 303


async def _membership(engine: AsyncEngine, user_id: str, organization_id: str) -> Any:
    from signoff_club.directory import ClubDirectory

    async with engine.connect() as conn:
        found = await ClubDirectory().membership(conn, user_id, organization_id)
    assert found is not None
    return found


async def test_failed_attempts_on_one_account_are_limited_from_any_address(
    build: Callable[..., Any], client: Client, club: dict[str, Any]
) -> None:
    app = build(signin_failures_per_minute_per_account=3)
    viewer = club["users"]["viewer"]
    codes = []
    for i in range(3):  # three addresses: a spray from many machines still counts per account
        wrong = await _sign_in(client(app, f"198.51.100.{i}"), viewer, "not-the-password")
        codes.append(wrong.status_code)
    assert codes == [401, 401, 401]
    limited = await client(app, "198.51.100.9").post(
        "/signin",
        data={"email": viewer["email"].upper(), "password": viewer["password"]},  # even right
        headers={"Accept-Language": "fr-CA,fr;q=0.9"},
    )
    assert limited.status_code == 429
    seconds = int(limited.headers["retry-after"])
    assert seconds >= 1
    assert f"Réessayez dans {seconds} secondes" in limited.text
    assert sessions.COOKIE not in limited.headers.get("set-cookie", "")
    # another account is not held back
    other = await _sign_in(client(app, "198.51.100.9"), club["users"]["manager"])
    assert other.status_code == 303


async def test_attempts_from_one_address_are_limited_whatever_the_account(
    build: Callable[..., Any], client: Client, club: dict[str, Any]
) -> None:
    app = build(signin_per_minute_per_address=4)
    http = client(app, "203.0.113.7")
    codes = []
    for i in range(4):
        attempt = await http.post(
            "/signin", data={"email": f"guess{i}@club.example", "password": "x"}
        )
        codes.append(attempt.status_code)
    limited = await _sign_in(http, club["users"]["manager"])
    assert codes == [401, 401, 401, 401]
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert "Too many sign-in attempts" in limited.text
    assert (await _sign_in(client(app, "203.0.113.8"), club["users"]["manager"])).status_code == 303


async def test_the_negative_control_without_limits_every_attempt_is_tried(
    build: Callable[..., Any], client: Client, club: dict[str, Any]
) -> None:
    app = build(
        UnsafeSettings(no_signin_rate_limit=True),
        signin_per_minute_per_address=1,
        signin_failures_per_minute_per_account=1,
    )
    http = client(app, "203.0.113.50")
    codes = [(await _sign_in(http, club["users"]["viewer"], "wrong")).status_code for _ in range(3)]
    assert codes == [401, 401, 401]


async def test_an_old_scrypt_hash_signs_in_through_the_web_and_is_upgraded(
    build: Callable[..., Any], client: Client, engine: AsyncEngine
) -> None:
    async with engine.begin() as conn:
        fresh = await seed_organization(conn)
    viewer = fresh["users"]["viewer"]
    old = scrypt_hash(viewer["password"], b"0123456789abcdef")
    async with engine.begin() as conn:
        await conn.execute(
            t.users.update().where(t.users.c.id == viewer["id"]).values(password_hash=old)
        )
    assert (await _sign_in(client(build()), viewer)).status_code == 303
    async with engine.connect() as conn:
        stored = await conn.scalar(
            select(t.users.c.password_hash).where(t.users.c.id == viewer["id"])
        )
    assert str(stored).startswith("$argon2id$v=19$m=19456,t=2,p=1$")


async def test_an_operator_ends_every_session_of_a_person_from_the_cli(
    build: Callable[..., Any], client: Client, club: dict[str, Any], database_url: str
) -> None:
    import asyncio

    from signoff_web.cli import app as cli
    from typer.testing import CliRunner

    app = build()
    viewer = club["users"]["viewer"]
    cookies = [await _signed_in_cookie(client(app, f"192.0.2.{i}"), viewer) for i in (30, 31)]
    http = client(app)
    assert all([(await http.get("/", headers=_as(c))).status_code == 200 for c in cookies])
    env = {"SIGNOFF_DB__URL": database_url, "SIGNOFF_ENV": "test"}
    args = ["revoke-sessions", "--user", viewer["id"]]
    result = await asyncio.to_thread(CliRunner().invoke, cli, args, env=env)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "2"
    for cookie in cookies:
        assert (await http.get("/", headers=_as(cookie))).status_code == 303
