"""Reads and conversation calls over the agent's and the proposals service's HTTP APIs.

Every call carries the person's own short-lived bearer token, so each service checks who they
are and what their organization is, exactly as for any other client: the web holds no power of
its own. Each API gets a token of its own audience (``Tokens``): the agent never sees a token
that could approve. A problem document comes back as ``ApiError`` with its status and ``code``.
Every call carries the request's trace (``traceparent``), so one correlation id finds a page's
request in every service's logs.

The event streams (``events``) use their own client: a stream holds its connection for as long
as a page is open, so it must neither wait for nor starve the pool of short calls, and it has no
read deadline beyond the keep-alives it expects.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from signoff_runtime import tracing
from signoff_runtime.tokens import AGENT_AUDIENCE, PROPOSALS_AUDIENCE


class ApiError(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"{status} {code}")
        self.status = status
        self.code = code


class Tokens:
    """The person's tokens for one request, one per API audience, each minted when first used."""

    def __init__(self, mint: Callable[[str], str]) -> None:
        self._mint = mint

    @functools.cached_property
    def agent(self) -> str:
        return self._mint(AGENT_AUDIENCE)

    @functools.cached_property
    def proposals(self) -> str:
        """Also what approval commands carry."""
        return self._mint(PROPOSALS_AUDIENCE)


@dataclass
class Apis:
    http: httpx.AsyncClient
    agent_url: str
    proposals_url: str
    #: long-lived event streams; ``None`` uses ``http``
    streams: httpx.AsyncClient | None = None

    async def _call(self, method: str, url: str, token: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}", **tracing.headers()}
        response = await self.http.request(method, url, headers=headers, **kwargs)
        if response.status_code >= 400:
            raise ApiError(response.status_code, _code(response))
        return response.json()

    # -- agent ---------------------------------------------------------------------------
    async def open_conversation(self, tokens: Tokens, section: str, resource_id: str) -> str:
        body = {"section": section, "resource_id": resource_id}
        view = await self._call(
            "POST", f"{self.agent_url}/v1/conversations", tokens.agent, json=body
        )
        return str(view["id"])

    async def say(self, tokens: Tokens, conversation_id: str, content: str) -> Any:
        url = f"{self.agent_url}/v1/conversations/{conversation_id}/messages"
        return await self._call("POST", url, tokens.agent, json={"content": content})

    async def conversation(self, tokens: Tokens, conversation_id: str) -> dict[str, Any]:
        url = f"{self.agent_url}/v1/conversations/{conversation_id}"
        return dict(await self._call("GET", url, tokens.agent))

    async def sections(self, tokens: Tokens) -> list[dict[str, Any]]:
        """The sections the agent serves: ``section``, ``resource``, ``title`` per locale."""
        page = await self._call("GET", f"{self.agent_url}/v1/sections", tokens.agent)
        return list(page["items"])

    async def resources(self, tokens: Tokens, section: str) -> list[dict[str, Any]]:
        url = f"{self.agent_url}/v1/sections/{section}/resources"
        return list((await self._call("GET", url, tokens.agent))["items"])

    def conversation_events_url(self, conversation_id: str) -> str:
        return f"{self.agent_url}/v1/conversations/{conversation_id}/events"

    def proposal_events_url(self) -> str:
        return f"{self.proposals_url}/v1/events"

    @asynccontextmanager
    async def events(
        self, url: str, token: str, last_event_id: str | None = None
    ) -> AsyncIterator[AsyncIterator[tuple[str | None, str, str]]]:
        """A server-sent event stream as ``(id, event, data)`` tuples (comments dropped)."""
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        client = self.streams or self.http
        async with client.stream("GET", url, headers=headers) as response:
            if response.status_code >= 400:
                await response.aread()
                raise ApiError(response.status_code, _code(response))
            yield _parse(response.aiter_lines())

    # -- proposals -----------------------------------------------------------------------
    async def proposal(self, tokens: Tokens, proposal_id: str) -> dict[str, Any]:
        url = f"{self.proposals_url}/v1/proposals/{proposal_id}"
        return dict(await self._call("GET", url, tokens.proposals))

    async def pending(self, tokens: Tokens) -> list[dict[str, Any]]:
        url = f"{self.proposals_url}/v1/proposals"
        page = await self._call(
            "GET", url, tokens.proposals, params={"status": "pending", "limit": 100}
        )
        return list(page["items"])

    async def pending_pauses(self, tokens: Tokens) -> list[dict[str, Any]]:
        url = f"{self.proposals_url}/v1/pause-points"
        page = await self._call(
            "GET", url, tokens.proposals, params={"status": "pending", "limit": 100}
        )
        return list(page["items"])

    async def pause_point(self, tokens: Tokens, pause_point_id: str) -> dict[str, Any]:
        url = f"{self.proposals_url}/v1/pause-points/{pause_point_id}"
        return dict(await self._call("GET", url, tokens.proposals))

    async def reconciliation(self, tokens: Tokens, proposal_id: str) -> dict[str, Any]:
        url = f"{self.proposals_url}/v1/proposals/{proposal_id}/reconciliation"
        return dict(await self._call("GET", url, tokens.proposals))


def _code(response: httpx.Response) -> str:
    try:
        return str(response.json().get("code", "error"))
    except (ValueError, AttributeError):
        return "error"


async def _parse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, str, str]]:
    event_id: str | None = None
    event, data = "message", list[str]()
    async for line in lines:
        if line == "":
            if data:
                yield event_id, event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event_id = value
            elif field == "event":
                event = value
            elif field == "data":
                data.append(value)
