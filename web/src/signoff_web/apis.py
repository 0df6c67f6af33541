"""Reads and conversation calls over the agent's and the proposals service's HTTP APIs.

Every call carries the person's own short-lived bearer token, so each service checks who they
are and what their organization is, exactly as for any other client: the web holds no power of
its own. Each API gets a token of its own audience (``Tokens``): the agent never sees a token
that could approve. A problem document comes back as ``ApiError`` with its status and ``code``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
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

    async def _call(self, method: str, url: str, token: str, **kwargs: Any) -> Any:
        response = await self.http.request(
            method, url, headers={"Authorization": f"Bearer {token}"}, **kwargs
        )
        if response.status_code >= 400:
            try:
                code = str(response.json().get("code", "error"))
            except ValueError:
                code = "error"
            raise ApiError(response.status_code, code)
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
