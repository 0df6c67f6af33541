"""Body sizes (413) and per-person request rates (429 with Retry-After), on a tiny app."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI
from signoff_runtime.http import install_standard_routes
from signoff_runtime.limits import TokenBuckets
from signoff_runtime.settings import LimitsSettings, ServiceSettings
from signoff_runtime.tokens import issue_token


def app(limits: LimitsSettings) -> FastAPI:
    settings = ServiceSettings(limits=limits)
    api = FastAPI()

    @api.post("/v1/proposals/{pid}/approve")
    async def approve(pid: str) -> dict[str, str]:
        return {"id": pid}

    @api.post("/v1/conversations/{cid}/messages")
    async def message(cid: str, body: dict[str, str]) -> dict[str, str]:
        return {"id": cid}

    install_standard_routes(api, {}, settings)
    return api


def client(api: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://t")


async def test_a_body_over_the_limit_is_refused_413_declared_or_streamed() -> None:
    async with client(app(LimitsSettings(max_body_bytes=2048))) as http:
        small = await http.post("/v1/conversations/c/messages", json={"content": "x" * 100})
        big = await http.post("/v1/conversations/c/messages", json={"content": "x" * 5000})

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"x" * 1000

        streamed = await http.post("/v1/conversations/c/messages", content=chunks())
    assert small.status_code == 200
    for refused in (big, streamed):
        assert refused.status_code == 413
        assert refused.json()["code"] == "payload_too_large"
        assert refused.headers["content-type"] == "application/problem+json"


async def test_a_persons_approvals_beyond_the_rate_get_429_with_retry_after() -> None:
    settings = ServiceSettings()
    alice = {"Authorization": f"Bearer {issue_token(settings.auth, 'usr_a', 'org_1')}"}
    bob = {"Authorization": f"Bearer {issue_token(settings.auth, 'usr_b', 'org_1')}"}
    async with client(app(LimitsSettings(approvals_per_minute=3))) as http:
        codes = [
            (await http.post("/v1/proposals/p/approve", headers=alice)).status_code
            for _ in range(4)
        ]
        limited = await http.post("/v1/proposals/p/approve", headers=alice)
        other = await http.post("/v1/proposals/p/approve", headers=bob)
        anonymous = await http.post("/v1/proposals/p/approve")
    assert codes == [200, 200, 200, 429]
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert limited.json()["code"] == "rate_limited"
    assert other.status_code == 200  # per person
    assert anonymous.status_code == 200  # not counted here; the real route answers 401


async def test_messages_have_their_own_bucket() -> None:
    settings = ServiceSettings()
    alice = {"Authorization": f"Bearer {issue_token(settings.auth, 'usr_a', 'org_1')}"}
    async with client(app(LimitsSettings(messages_per_minute=1))) as http:
        first = await http.post("/v1/conversations/c/messages", json={}, headers=alice)
        second = await http.post("/v1/conversations/c/messages", json={}, headers=alice)
        approval = await http.post("/v1/proposals/p/approve", headers=alice)
    assert (first.status_code, second.status_code, approval.status_code) == (200, 429, 200)


def test_the_bucket_refills_with_time() -> None:
    now = [0.0]
    buckets = TokenBuckets(rate=60, clock=lambda: now[0])
    assert all(buckets.take("k") == 0 for _ in range(60))
    assert buckets.take("k") > 0
    now[0] += 1.0
    assert buckets.take("k") == 0
