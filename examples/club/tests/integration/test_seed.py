from __future__ import annotations

import json
from typing import Any

import pytest
from signoff_club import tables as t
from signoff_club.cli import app
from signoff_club.seed import seed_demo
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from typer.testing import CliRunner

pytestmark = pytest.mark.integration


def _shape(output: dict[str, Any]) -> None:
    """The keys the walkthrough, the docs and the tests rely on; a seed may carry more (a new
    operation's demo case) without an edit here."""
    assert set(output) == {"organizations"} and len(output["organizations"]) == 2
    for org in output["organizations"]:
        assert set(org) >= {"id", "name", "users", "refund_case", "broadcast_case"}
        assert org["id"].startswith("org_")
        assert set(org["users"]) == {"manager", "viewer"}
        for role, user in org["users"].items():
            assert set(user) == {"id", "email", "password"}
            assert user["email"].startswith(f"{role}+") and user["password"] == f"demo-{role}"
        assert set(org["refund_case"]) >= {"order_id", "payment_id", "line_item_id", "discount_id"}
        assert set(org["broadcast_case"]) >= {"broadcast_id", "segment_ids"}
        assert len(org["broadcast_case"]["segment_ids"]) == 2


async def test_every_seed_makes_fresh_organizations(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        first = await seed_demo(conn)
        second = await seed_demo(conn)
    _shape(first)
    _shape(second)
    ids = [o["id"] for o in first["organizations"] + second["organizations"]]
    names = [o["name"] for o in first["organizations"] + second["organizations"]]
    assert len(set(ids)) == len(set(names)) == 4
    async with engine.connect() as conn:
        found = await conn.execute(
            select(func.count()).select_from(t.organizations).where(t.organizations.c.id.in_(ids))
        )
        assert found.scalar_one() == 4


def test_the_cli_prints_only_json(database_url: str) -> None:
    result = CliRunner().invoke(app, ["seed"], env={"SIGNOFF_DB__URL": database_url})
    assert result.exit_code == 0, result.output
    _shape(json.loads(result.stdout))
