from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from signoff_club.directory import ClubDirectory, authenticate
from signoff_club.testing import RefundWorld
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def test_memberships_come_from_the_club_tables(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    directory = ClubDirectory()
    org, other = refund_world.organization, refund_world.other_organization
    manager, viewer = org["users"]["manager"], org["users"]["viewer"]
    async with engine.connect() as conn:
        found = await directory.membership(conn, manager["id"], org["id"])
        assert found is not None
        assert (found.role, found.organization_id, found.locale) == ("manager", org["id"], "en")
        assert (await directory.membership(conn, viewer["id"], org["id"])).role == "viewer"  # type: ignore[union-attr]
        assert await directory.membership(conn, manager["id"], other["id"]) is None
        assert [m.organization_id for m in await directory.memberships(conn, viewer["id"])] == [
            org["id"]
        ]
        assert await directory.memberships(conn, "usr_nobody") == []


async def test_sign_in(engine: AsyncEngine, refund_world: RefundWorld) -> None:
    org = refund_world.organization
    manager = org["users"]["manager"]
    async with engine.connect() as conn:
        signed_in = await authenticate(conn, manager["email"].upper(), manager["password"])
        assert signed_in is not None and signed_in.user_id == manager["id"]
        assert await authenticate(conn, manager["email"], "demo-viewer") is None
        assert await authenticate(conn, "nobody@club.example", "demo-manager") is None
        other_org = refund_world.other_organization["id"]
        assert await authenticate(conn, manager["email"], manager["password"], other_org) is None


async def test_memberships_by_email_match_whatever_case_was_typed(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    """``signoff token --user manager+x@club.example`` names the person by e-mail."""
    directory = ClubDirectory()
    org = refund_world.organization
    manager = org["users"]["manager"]
    async with engine.connect() as conn:
        by_id = await directory.memberships(conn, manager["id"])
        by_email = await directory.memberships(conn, manager["email"])
        shouted = await directory.memberships(conn, f"  {manager['email'].upper()} ")
        assert by_email == shouted == by_id
        assert [(m.user_id, m.organization_id, m.role) for m in by_email] == [
            (manager["id"], org["id"], "manager")
        ]
        assert await directory.memberships(conn, "nobody@club.example") == []
        # an id is never read as an address, nor an address as an id
        assert await directory.memberships(conn, manager["email"].split("@")[0]) == []


async def test_an_old_scrypt_hash_signs_in_and_is_replaced_by_argon2id(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    """Rows written before argon2id keep working; the first sign-in upgrades them."""
    from signoff_club import tables as t
    from signoff_club.passwords import scrypt_hash

    viewer = refund_world.organization["users"]["viewer"]
    old = scrypt_hash(viewer["password"], b"fixed-salt-16byt")
    async with engine.begin() as conn:
        await conn.execute(
            t.users.update().where(t.users.c.id == viewer["id"]).values(password_hash=old)
        )
    async with engine.begin() as conn:
        assert await authenticate(conn, viewer["email"], "wrong") is None
    async with engine.connect() as conn:
        assert await _stored(conn, viewer["id"]) == old  # a failed sign-in changes nothing
    async with engine.begin() as conn:
        signed_in = await authenticate(conn, viewer["email"], viewer["password"])
        assert signed_in is not None and signed_in.user_id == viewer["id"]
    async with engine.connect() as conn:
        upgraded = await _stored(conn, viewer["id"])
    assert upgraded.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    async with engine.connect() as conn:
        again = await authenticate(conn, viewer["email"], viewer["password"])
    assert again is not None and again.user_id == viewer["id"]


async def test_hashing_never_runs_on_the_event_loop(
    engine: AsyncEngine, refund_world: RefundWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every hash a sign-in computes (the member's, and the decoy for an unknown address) runs
    in a thread with no event loop: inline, the loop would stall for the whole verification.
    Checked by where the calls run, not by timing them (a loaded machine pauses any loop)."""
    import asyncio

    from signoff_club import directory
    from signoff_club.passwords import verify_password

    calls: list[tuple[str, bool]] = []

    def on_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def recorded(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls.append((name, on_loop()))
            return function(*args)

        return call

    monkeypatch.setattr(directory, "verify_password", recorded("verify", verify_password))
    monkeypatch.setattr(directory, "_decoy_hash", recorded("decoy", directory._decoy_hash))
    manager = refund_world.organization["users"]["manager"]
    async with engine.connect() as conn:
        assert await authenticate(conn, manager["email"], "wrong-password") is None
        assert await authenticate(conn, "nobody@club.example", "wrong-password") is None
    assert ("verify", False) in calls and ("decoy", False) in calls, calls
    assert all(not looped for _, looped in calls), calls


async def _stored(conn: object, user_id: str) -> str:
    from signoff_club import tables as t
    from sqlalchemy import select
    from sqlalchemy.ext.asyncio import AsyncConnection

    assert isinstance(conn, AsyncConnection)
    value = await conn.scalar(select(t.users.c.password_hash).where(t.users.c.id == user_id))
    return str(value)
