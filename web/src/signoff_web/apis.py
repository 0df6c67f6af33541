"""Reads and conversation calls over the agent's and the proposals service's HTTP APIs.

Every call carries the person's own short-lived bearer token, so each service checks who they
are and what their organization is, exactly as for any other client: the web holds no power of
its own. A problem document comes back as ``ApiError`` with its status and ``code``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx


class ApiError(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"{status} {code}")
        self.status = status
        self.code = code


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
    async def open_conversation(self, token: str, section: str, resource_id: str) -> str:
        body = {"section": section, "resource_id": resource_id}
        view = await self._call("POST", f"{self.agent_url}/v1/conversations", token, json=body)
        return str(view["id"])

    async def say(self, token: str, conversation_id: str, content: str) -> Any:
        url = f"{self.agent_url}/v1/conversations/{conversation_id}/messages"
        return await self._call("POST", url, token, json={"content": content})

    async def conversation(self, token: str, conversation_id: str) -> dict[str, Any]:
        url = f"{self.agent_url}/v1/conversations/{conversation_id}"
        return dict(await self._call("GET", url, token))

    # -- proposals -----------------------------------------------------------------------
    async def proposal(self, token: str, proposal_id: str) -> dict[str, Any]:
        url = f"{self.proposals_url}/v1/proposals/{proposal_id}"
        return dict(await self._call("GET", url, token))

    async def pending(self, token: str) -> list[dict[str, Any]]:
        url = f"{self.proposals_url}/v1/proposals"
        page = await self._call("GET", url, token, params={"status": "pending", "limit": 100})
        return list(page["items"])

    async def pending_pauses(self, token: str) -> list[dict[str, Any]]:
        url = f"{self.proposals_url}/v1/pause-points"
        page = await self._call("GET", url, token, params={"status": "pending", "limit": 100})
        return list(page["items"])

    async def pause_point(self, token: str, pause_point_id: str) -> dict[str, Any]:
        url = f"{self.proposals_url}/v1/pause-points/{pause_point_id}"
        return dict(await self._call("GET", url, token))

    async def reconciliation(self, token: str, proposal_id: str) -> dict[str, Any]:
        url = f"{self.proposals_url}/v1/proposals/{proposal_id}/reconciliation"
        return dict(await self._call("GET", url, token))
