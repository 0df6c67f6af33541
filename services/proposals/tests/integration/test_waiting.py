"""Waiting for a decision without polling: one proposal's stream (resumable), and the long poll."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from signoff_contracts.ids import new_id

pytestmark = pytest.mark.integration


async def _events(
    http: httpx.AsyncClient, pid: str, token: str, last: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Every event of the stream until it ends (it ends after a terminal status)."""
    headers = {"Authorization": f"Bearer {token}"} | ({"Last-Event-ID": last} if last else {})
    found: list[tuple[str, dict[str, Any]]] = []

    async def read() -> None:
        async with http.stream("GET", f"/v1/proposals/{pid}/events", headers=headers) as resp:
            assert resp.status_code == 200, await resp.aread()
            event_id = ""
            async for line in resp.aiter_lines():
                if line.startswith("id: "):
                    event_id = line[4:]
                elif line.startswith("data: "):
                    found.append((event_id, json.loads(line[6:])))

    await asyncio.wait_for(read(), 20.0)
    return found


async def test_the_stream_pushes_each_change_ends_at_a_terminal_status_and_resumes(service_process):
    service = service_process
    org = new_id("org")
    pid = await service.pending(org)
    manager = await service.approver(org)
    viewer = service.token(await service.member(org, "viewer"), org)

    reading = asyncio.create_task(_events(service.http, pid, viewer))
    declined = await service.http.post(
        f"/v1/proposals/{pid}/decline", headers={"Authorization": f"Bearer {manager}"}
    )
    assert declined.status_code == 200, declined.text
    events = await reading  # returns only because the stream ended after "declined"

    assert [data["to_status"] for _, data in events] == ["pending", "declined"]
    assert events[-1][1]["status"] == "declined"
    ids = [int(event_id) for event_id, _ in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # a reconnect after the first event gets exactly what it missed
    resumed = await _events(service.http, pid, viewer, last=str(ids[0]))
    assert [event_id for event_id, _ in resumed] == [str(i) for i in ids[1:]]


async def test_another_organizations_proposal_is_not_found_for_both_ways_of_waiting(
    service_process,
):
    service = service_process
    pid = await service.pending(new_id("org"))
    other = new_id("org")
    outsider = {"Authorization": f"Bearer {service.token(await service.member(other), other)}"}
    streamed = await service.http.get(f"/v1/proposals/{pid}/events", headers=outsider)
    polled = await service.http.get(f"/v1/proposals/{pid}", params={"wait": 1}, headers=outsider)
    anonymous = await service.http.get(f"/v1/proposals/{pid}", params={"wait": 1})
    assert (streamed.status_code, streamed.json()["code"]) == (404, "not_found")
    assert (polled.status_code, polled.json()["code"]) == (404, "not_found")
    assert anonymous.status_code == 401


async def test_the_long_poll_answers_at_the_change_not_at_the_deadline(service_process):
    service = service_process
    org = new_id("org")
    pid = await service.pending(org)
    manager = await service.approver(org)
    headers = {"Authorization": f"Bearer {manager}"}

    started = time.monotonic()
    polling = asyncio.create_task(
        # the status the client saw is named: whichever of poll and decision lands first, the
        # answer is "executing" as soon as the decision commits
        service.http.get(
            f"/v1/proposals/{pid}", params={"wait": 25, "status": "pending"}, headers=headers
        )
    )
    assert (await service.approve_http(pid, manager)).status_code == 200
    answered = await polling
    elapsed = time.monotonic() - started

    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "executing"
    assert elapsed < 20.0, "the poll waited for its deadline instead of the change"


async def test_the_long_poll_answers_at_once_when_the_client_saw_an_older_status(service_process):
    service = service_process
    org = new_id("org")
    pid = await service.pending(org)
    manager = await service.approver(org)
    assert (await service.approve_http(pid, manager)).status_code == 200
    headers = {"Authorization": f"Bearer {manager}"}

    started = time.monotonic()
    seen_pending = await service.http.get(
        f"/v1/proposals/{pid}", params={"wait": 25, "status": "pending"}, headers=headers
    )
    assert seen_pending.json()["status"] == "executing"
    assert time.monotonic() - started < 20.0
    # nothing changes: the poll answers after its (short) wait with the same status
    unchanged = await service.http.get(f"/v1/proposals/{pid}", params={"wait": 1}, headers=headers)
    assert unchanged.status_code == 200 and unchanged.json()["status"] == "executing"
