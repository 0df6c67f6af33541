"""The event stream: an organization's changes are pushed to its readers, and to no one else."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from signoff_contracts.ids import new_id

pytestmark = pytest.mark.integration


class Stream:
    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()
        self.ended = False

    async def next_event(self, within: float = 15.0) -> tuple[str, dict[str, Any]]:
        """The next event (keep-alive comments skipped); raises at the deadline or the end."""

        async def read() -> tuple[str, dict[str, Any]]:
            kind = ""
            async for line in self.lines:
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    return kind, json.loads(line[6:])
            self.ended = True
            raise EOFError

        return await asyncio.wait_for(read(), within)

    async def until(self, ref: str, status: str, within: float = 15.0) -> None:
        async def look() -> None:
            while True:
                kind, data = await self.next_event(within)
                if kind == "change" and (data["id"], data["status"]) == (ref, status):
                    return

        await asyncio.wait_for(look(), within)

    async def connected(self) -> None:
        """Subscribed: the stream's first line is sent after its subscription."""
        async for line in self.lines:
            if line == ": connected":
                return


@asynccontextmanager
async def stream(http: httpx.AsyncClient, token: str) -> AsyncIterator[Stream]:
    headers = {"Authorization": f"Bearer {token}"}
    async with http.stream("GET", "/v1/events", headers=headers, timeout=30.0) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        opened = Stream(response)
        await asyncio.wait_for(opened.connected(), 10.0)
        yield opened


async def test_changes_reach_the_organizations_readers_only(service_process):
    service = service_process
    org, other = new_id("org"), new_id("org")
    viewer = service.token(await service.member(org, "viewer"), org)
    outsider = service.token(await service.member(other, "viewer"), other)
    async with stream(service.http, viewer) as mine, stream(service.http, outsider) as theirs:
        created = await service.pending(org)
        await mine.until(created, "pending")
        assert (await service.approve_http(created, await service.approver(org))).status_code == 200
        await mine.until(created, "executing")
        foreign = await service.pending(other)
        await theirs.until(foreign, "pending")
        # the outsider's stream saw its own organization's change and nothing of ours
        with pytest.raises(TimeoutError):
            await theirs.until(created, "pending", within=3.0)


async def test_a_stream_ends_once_the_reader_is_no_longer_a_member(service_process):
    service = service_process
    org = new_id("org")
    user = await service.member(org, "viewer")
    async with stream(service.http, service.token(user, org)) as events:
        await service.remove_member(org, user)
        with pytest.raises(EOFError):
            while True:
                await events.next_event(within=10.0)


async def test_a_person_holds_a_bounded_number_of_streams(service_process):
    service = service_process
    org = new_id("org")
    token = service.token(await service.member(org, "viewer"), org)
    other = service.token(await service.member(org, "viewer"), org)
    async with stream(service.http, token), stream(service.http, token):
        third = await service.http.get("/v1/events", headers={"Authorization": f"Bearer {token}"})
        assert third.status_code == 429 and third.json()["code"] == "too_many_streams"
        async with stream(service.http, other) as theirs:
            assert not theirs.ended
    # closed streams are counted out once the service notices the reader went away
    deadline = asyncio.get_running_loop().time() + 10.0
    headers = {"Authorization": f"Bearer {token}"}
    while True:
        async with service.http.stream("GET", "/v1/events", headers=headers) as again:
            if again.status_code == 200:
                break
        assert asyncio.get_running_loop().time() < deadline, "closed streams still counted"
        await asyncio.sleep(0.2)


async def test_the_stream_needs_a_token(service_process):
    response = await service_process.http.get("/v1/events")
    assert response.status_code == 401
