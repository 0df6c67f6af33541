"""The club data the proposals act on, made fast: one organization, one broadcast form each.

``email_broadcast.apply_draft`` fails closed with ``broadcast_changed`` once another draft has
moved the form's revision, so every proposal gets a form of its own and every execution
succeeds. Forms are written with ``COPY`` (thousands per second); the organization, its manager
and its segments come from the domain's demo seed, asked as an operator would
(``signoff demo seed``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
from signoff_contracts.ids import new_id
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import issue_token

KIND = "email_broadcast.apply_draft"
PROPOSE_CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class Club:
    organization_id: str
    manager_id: str
    segment_ids: list[str]
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def seed_club(env: dict[str, str]) -> Club:
    """The first organization ``signoff demo seed`` makes in the stack's database (``env``)."""
    argv = [sys.executable, "-c", "from signoff_cli.main import main; main()", "demo", "seed"]
    done = await asyncio.to_thread(
        subprocess.run,
        argv,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"signoff demo seed failed ({done.returncode}): {done.stderr[-2000:]}")
    org: dict[str, Any] = json.loads(done.stdout)["organizations"][0]
    manager = org["users"]["manager"]["id"]
    return Club(
        organization_id=org["id"],
        manager_id=manager,
        segment_ids=list(org["broadcast_case"]["segment_ids"]),
        token=issue_token(AuthSettings(), manager, org["id"]),
    )


async def add_forms(conn: asyncpg.Connection, organization_id: str, count: int) -> list[str]:
    ids = [new_id("brd") for _ in range(count)]
    await conn.copy_records_to_table(
        "broadcast_forms",
        schema_name="club",
        columns=["id", "organization_id", "name"],
        records=[(fid, organization_id, f"Bench broadcast {i}") for i, fid in enumerate(ids)],
    )
    return ids


def draft(index: int, segment_ids: list[str]) -> dict[str, Any]:
    return {
        "segment_ids": segment_ids,
        "subject": f"Spring bonspiel — sign-up opens ({index})",
        "body": "Teams of four, all levels welcome. " * 8,
    }


async def propose_all(agent_url: str, club: Club, form_ids: list[str]) -> list[str]:
    """One proposal per form through ``POST /v1/operations/{kind}/propose``; their ids."""
    found: list[str] = []
    pending = iter(enumerate(form_ids))
    async with httpx.AsyncClient(base_url=agent_url, headers=club.headers, timeout=30) as http:

        async def worker() -> None:
            for index, form_id in pending:
                response = await http.post(
                    f"/v1/operations/{KIND}/propose",
                    json={"resource_id": form_id, "request": draft(index, club.segment_ids)},
                )
                if response.status_code != 201:
                    raise RuntimeError(f"propose answered {response.status_code}: {response.text}")
                found.append(response.json()["proposal"]["id"])

        await asyncio.gather(*(worker() for _ in range(PROPOSE_CONCURRENCY)))
    return found
