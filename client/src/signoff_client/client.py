"""``SignoffClient`` (sync) and ``AsyncSignoffClient``: the same calls, two ways of sending.

Two services answer: the agent (the catalogue and propose, agent-audience token) and the
proposals service (reads, waiting, decisions; proposals-audience token). Give one token that
holds both audiences, or one for each.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel
from signoff_contracts.status import ProposalStatus

from signoff_client import _core
from signoff_client._core import Call
from signoff_client.errors import SignoffError, WaitTimeout
from signoff_client.models import ApprovalReply, Operation, Proposal, Proposed

T = TypeVar("T")
Until = Literal["decided", "finished"]
#: the longest one long poll asks the server to hold (the server caps it too)
POLL_S = 25.0


class _Base:
    def __init__(
        self,
        agent_url: str,
        proposals_url: str,
        token: str,
        *,
        proposals_token: str | None = None,
        retries: int = 3,
    ) -> None:
        self._urls = {"agent": agent_url.rstrip("/"), "proposals": proposals_url.rstrip("/")}
        self._tokens = {"agent": token, "proposals": proposals_token or token}
        self.retries = retries

    def _request(self, call: Call[Any]) -> dict[str, Any]:
        return {
            "method": call.method,
            "url": self._urls[call.service] + call.path,
            "json": call.json,
            "params": call.params or None,
            "headers": {"Authorization": f"Bearer {self._tokens[call.service]}", **call.headers},
        }

    def _events_request(self, proposal_id: str, last_id: str | None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._tokens['proposals']}"}
        if last_id:
            headers["Last-Event-ID"] = last_id
        return {
            "method": "GET",
            "url": f"{self._urls['proposals']}/v1/proposals/{proposal_id}/events",
            "headers": headers,
        }


def _reached(status: str, until: Until) -> bool:
    return ProposalStatus(status).is_terminal or (until == "decided" and status != "pending")


class SignoffClient(_Base):
    """Blocking client (``httpx.Client``). Use as a context manager, or call ``close()``."""

    def __init__(self, agent_url: str, proposals_url: str, token: str, **kw: Any) -> None:
        transport = kw.pop("transport", None)
        timeout = kw.pop("timeout", 30.0)
        super().__init__(agent_url, proposals_url, token, **kw)
        self._http = httpx.Client(timeout=timeout, transport=transport)

    def __enter__(self) -> SignoffClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            error: Exception | None = None
            response = None
            try:
                response = self._http.request(**self._request(call))
            except httpx.HTTPError as exc:
                error = exc
            if not _core.should_retry(call, attempt, self.retries, error, response):
                if error is not None:
                    raise _core.unreachable(error) from error
                assert response is not None
                return call.parse(response)
            time.sleep(_core.backoff_s(attempt))
            attempt += 1

    def operations(self) -> list[Operation]:
        return self._send(_core.operations())

    def operation(self, kind: str) -> Operation:
        return self._send(_core.operation(kind))

    def propose(
        self,
        kind: str,
        resource_id: str,
        request: BaseModel | dict[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Proposed:
        return self._send(_core.propose(kind, resource_id, request, idempotency_key))

    def get(self, proposal_id: str) -> Proposal:
        return self._send(_core.get(proposal_id))

    def approve(self, proposal_id: str) -> ApprovalReply:
        return self._send(_core.decide(proposal_id, "approve", None))

    def decline(self, proposal_id: str, reason: str | None = None) -> ApprovalReply:
        return self._send(_core.decide(proposal_id, "decline", reason))

    def withdraw(self, proposal_id: str, reason: str | None = None) -> ApprovalReply:
        return self._send(_core.decide(proposal_id, "withdraw", reason))

    def resolve(self, pause_point_id: str, action: str, **answer: Any) -> ApprovalReply:
        return self._send(_core.resolve_pause_point(pause_point_id, {"action": action, **answer}))

    def wait(self, proposal_id: str, timeout: float, until: Until = "finished") -> Proposal:
        """The proposal once decided (``until="decided"``) or finished (the default): followed
        by server-sent events, by long polls when no stream opens; ``WaitTimeout`` at the end."""
        deadline = time.monotonic() + timeout
        seen = self._follow(proposal_id, deadline, until)
        while seen is None or not _reached(seen, until):
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(408, "wait_timeout", "No decision in time.", {"status": seen})
            seen = self._send(_core.get(proposal_id, min(left, POLL_S), seen)).status.value
        return self.get(proposal_id)

    def _follow(self, proposal_id: str, deadline: float, until: Until) -> str | None:
        reader = _core.EventReader()
        seen = None
        try:
            request = self._events_request(proposal_id, None)
            left = max(deadline - time.monotonic(), 0.1)
            with self._http.stream(**request, timeout=httpx.Timeout(left, read=left)) as resp:
                _core.raise_for_problem(resp)
                for change in reader.feed(resp.iter_lines()):
                    seen = str(change["status"])
                    if _reached(seen, until) or time.monotonic() >= deadline:
                        break
        except SignoffError as exc:
            if exc.status in (401, 403, 404):
                raise
        except httpx.HTTPError:
            pass  # no stream: the long poll takes over from what was seen
        return seen


class AsyncSignoffClient(_Base):
    """Asynchronous client (``httpx.AsyncClient``). ``async with`` it, or ``await aclose()``."""

    def __init__(self, agent_url: str, proposals_url: str, token: str, **kw: Any) -> None:
        transport = kw.pop("transport", None)
        timeout = kw.pop("timeout", 30.0)
        super().__init__(agent_url, proposals_url, token, **kw)
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncSignoffClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            error: Exception | None = None
            response = None
            try:
                response = await self._http.request(**self._request(call))
            except httpx.HTTPError as exc:
                error = exc
            if not _core.should_retry(call, attempt, self.retries, error, response):
                if error is not None:
                    raise _core.unreachable(error) from error
                assert response is not None
                return call.parse(response)
            await asyncio.sleep(_core.backoff_s(attempt))
            attempt += 1

    async def operations(self) -> list[Operation]:
        return await self._send(_core.operations())

    async def operation(self, kind: str) -> Operation:
        return await self._send(_core.operation(kind))

    async def propose(
        self,
        kind: str,
        resource_id: str,
        request: BaseModel | dict[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Proposed:
        return await self._send(_core.propose(kind, resource_id, request, idempotency_key))

    async def get(self, proposal_id: str) -> Proposal:
        return await self._send(_core.get(proposal_id))

    async def approve(self, proposal_id: str) -> ApprovalReply:
        return await self._send(_core.decide(proposal_id, "approve", None))

    async def decline(self, proposal_id: str, reason: str | None = None) -> ApprovalReply:
        return await self._send(_core.decide(proposal_id, "decline", reason))

    async def withdraw(self, proposal_id: str, reason: str | None = None) -> ApprovalReply:
        return await self._send(_core.decide(proposal_id, "withdraw", reason))

    async def resolve(self, pause_point_id: str, action: str, **answer: Any) -> ApprovalReply:
        call = _core.resolve_pause_point(pause_point_id, {"action": action, **answer})
        return await self._send(call)

    async def wait(self, proposal_id: str, timeout: float, until: Until = "finished") -> Proposal:
        """See ``SignoffClient.wait``."""
        deadline = time.monotonic() + timeout
        seen = await self._follow(proposal_id, deadline, until)
        while seen is None or not _reached(seen, until):
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(408, "wait_timeout", "No decision in time.", {"status": seen})
            polled = await self._send(_core.get(proposal_id, min(left, POLL_S), seen))
            seen = polled.status.value
        return await self.get(proposal_id)

    async def _follow(self, proposal_id: str, deadline: float, until: Until) -> str | None:
        reader = _core.EventReader()
        seen = None
        try:
            request = self._events_request(proposal_id, None)
            left = max(deadline - time.monotonic(), 0.1)
            async with self._http.stream(**request, timeout=httpx.Timeout(left, read=left)) as resp:
                _core.raise_for_problem(resp)
                async for line in resp.aiter_lines():
                    for change in reader.line(line):
                        seen = str(change["status"])
                    if seen is not None and _reached(seen, until):
                        break
                    if time.monotonic() >= deadline:
                        break
        except SignoffError as exc:
            if exc.status in (401, 403, 404):
                raise
        except httpx.HTTPError:
            pass
        return seen
