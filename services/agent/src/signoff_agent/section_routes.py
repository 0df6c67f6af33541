"""Which sections the agent serves, so a frontend builds its pages from them, not from a copy.

- ``GET /v1/sections`` — every section an assistant is loaded for (``signoff.assistants``):
  its name, the kind of resource a conversation opens on, and its title in every locale;
- ``GET /v1/sections/{section}/resources`` — the caller's organization's resources of that
  section a conversation can open on, labelled in the caller's locale (the assistant's own
  ``resources``); an unknown section is ``404 unknown_section``.

Both need a valid token (the list of sections is no secret, but the agent answers no anonymous
caller); the organization is always the token's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Query, Request
from signoff_contracts.operations import LOCALES
from signoff_runtime.problems import Problem

from signoff_agent.conversation_routes import Conversations
from signoff_agent.sections import UnknownSection

router = APIRouter()
MAX_RESOURCES = 100


def _agent(request: Request) -> Conversations:
    agent: Conversations = request.app.state.conversations
    return agent


@router.get("/v1/sections")
async def list_sections(
    request: Request, authorization: str | None = Header(default=None)
) -> dict[str, Any]:
    agent = _agent(request)
    await agent.member(authorization)
    items = []
    for name in agent.sections.names():
        assistant = agent.sections.get(name)
        items.append(
            {
                "section": name,
                "resource": assistant.resource,
                "title": {locale: assistant.title_in(locale) for locale in LOCALES},
            }
        )
    return {"items": items, "next_cursor": None}


@router.get("/v1/sections/{section}/resources")
async def list_resources(
    section: str,
    request: Request,
    authorization: str | None = Header(default=None),
    limit: int = Query(default=MAX_RESOURCES, ge=1, le=MAX_RESOURCES),
) -> dict[str, Any]:
    agent = _agent(request)
    member = await agent.member(authorization)
    try:
        assistant = agent.sections.get(section)
    except UnknownSection:
        raise Problem(404, "unknown_section", "No assistant works in this section.") from None
    async with agent.engine.connect() as conn:
        found = await assistant.resources(conn, member.organization_id, member.locale, limit)
    items = [{"id": item.id, "label": item.label} for item in found[:limit]]
    return {"section": section, "items": items, "next_cursor": None}
