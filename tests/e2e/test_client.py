"""signoff-client against a real stack: the catalogue, propose (keyed), wait, decide, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from e2e_stack import Stack
from signoff_client import AsyncSignoffClient, Forbidden, Invalid, NotFound, SignoffClient
from test_lifecycle import refund_request

pytestmark = pytest.mark.e2e
REFUND = "order.refund_missing_discount"


class NoStreams(httpx.AsyncBaseTransport):
    """A network on which server-sent event streams never open (a proxy that buffers them)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            self.refused += 1
            raise httpx.ConnectError("streams are blocked here", request=request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _client(stack: Stack, token: str, **kw: Any) -> AsyncSignoffClient:
    return AsyncSignoffClient(stack.url("agent"), stack.url("proposals"), token, **kw)


async def test_propose_wait_and_approve_through_the_client(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    manager = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    async with _client(stack, manager) as signoff:
        kinds = {op.kind for op in await signoff.operations()}
        assert REFUND in kinds
        first = await signoff.propose(
            REFUND, case["order_id"], refund_request(case), idempotency_key="case-1"
        )
        again = await signoff.propose(
            REFUND, case["order_id"], refund_request(case), idempotency_key="case-1"
        )
        assert again.proposal.id == first.proposal.id  # one card for one case
        assert first.rendered_preview is not None and first.rendered_preview.lines
        pid = first.proposal.id

        waiting = asyncio.create_task(signoff.wait(pid, timeout=60))
        reply = await signoff.approve(pid)
        assert reply.result == "claimed"
        done = await waiting
    assert done.status.value == "succeeded" and done.outcome is not None
    assert [entry.to_status for entry in done.audit if entry.to_status][-1].value == "succeeded"


async def test_wait_falls_back_to_the_long_poll_when_no_stream_opens(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    manager = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]
    blocked = NoStreams()
    async with _client(stack, manager, transport=blocked) as signoff:
        pid = (await signoff.propose(REFUND, case["order_id"], refund_request(case))).proposal.id
        waiting = asyncio.create_task(signoff.wait(pid, timeout=60, until="decided"))
        assert (await signoff.decline(pid, "not this one")).result == "declined"
        decided = await waiting
    assert blocked.refused >= 1
    assert decided.status.value == "declined" and decided.decline_reason == "not this one"


async def test_errors_are_typed_with_the_problem_code_sync_client(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    manager = stack.token(org["users"]["manager"], org)
    viewer = stack.token(org["users"]["viewer"], org)
    case = org["refund_case"]

    def run() -> None:
        with SignoffClient(stack.url("agent"), stack.url("proposals"), manager) as signoff:
            with pytest.raises(Invalid) as invalid:
                signoff.propose(REFUND, case["order_id"], {"payment_id": "nope"})
            assert invalid.value.code == "invalid_request" and invalid.value.problem["errors"]
            with pytest.raises(NotFound) as missing:
                signoff.get("prp_00000000000000000000000000")
            assert missing.value.code == "not_found"
            pid = signoff.propose(REFUND, case["order_id"], refund_request(case)).proposal.id
        with SignoffClient(stack.url("agent"), stack.url("proposals"), viewer) as looking:
            with pytest.raises(Forbidden) as forbidden:
                looking.approve(pid)
            assert forbidden.value.code == "forbidden"
            assert looking.get(pid).status.value == "pending"

    await asyncio.to_thread(run)
