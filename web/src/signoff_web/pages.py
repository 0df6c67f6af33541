"""The pages: where to start, a conversation, the inbox, one proposal's audit (sign-in: ``signin``).

Pages that change live (a conversation, the inbox, a proposal) have a ``/live`` fragment carrying
a ``data-version`` digest of what it shows. The page's script receives fresh fragments pushed over
the page's event stream (``live``); only when no stream can be opened does it fetch ``/live``
itself, each second, and swap the fragment in when its version changed.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from signoff_web import cards
from signoff_web.apis import ApiError, Tokens
from signoff_web.context import apis, render, session, tokens
from signoff_web.sections import Catalogue

router = APIRouter()
ROLES_SHOWN = ("user", "assistant", "app")


@router.get("/", response_class=HTMLResponse)
async def home(request: Request) -> Response:
    """Every section the agent serves, with the resources an assistant can be asked about."""
    who = session(request)
    bearer = tokens(request, who)
    catalogue: Catalogue = request.app.state.catalogue
    found = await catalogue.all(bearer)
    listed = await asyncio.gather(*(apis(request).resources(bearer, s.name) for s in found))
    shown = [
        {"name": s.name, "title": s.title_in(who.locale), "items": items}
        for s, items in zip(found, listed, strict=True)
    ]
    return render(request, "home.html", who, sections=shown)


@router.get("/chat/{conversation_id}", response_class=HTMLResponse)
async def chat(request: Request, conversation_id: str, notice: str | None = None) -> Response:
    return await _page(request, "chat.html", _chat_live(request, conversation_id), notice=notice)


@router.get("/chat/{conversation_id}/live", response_class=HTMLResponse)
async def chat_live(request: Request, conversation_id: str) -> Response:
    return await _page(request, "chat_live.html", _chat_live(request, conversation_id))


async def _chat_live(request: Request, conversation_id: str) -> dict[str, Any]:
    who = session(request)
    bearer = tokens(request, who)
    view = await apis(request).conversation(bearer, conversation_id)
    messages = [m for m in view["messages"] if m["role"] in ROLES_SHOWN]
    refs: list[tuple[str, str]] = []
    for m in messages:
        for kind in ("proposal_id", "pause_point_id"):
            if m.get(kind) and (kind, m[kind]) not in refs:
                refs.append((kind, m[kind]))
    built = await asyncio.gather(*(_card(request, bearer, kind, ref) for kind, ref in refs))
    by_id = {ref: card for (_, ref), card in zip(refs, built, strict=True) if card}
    shown: set[str] = set()
    items = []
    for m in messages:
        attached = []
        for kind in ("proposal_id", "pause_point_id"):
            ref = m.get(kind)
            if ref and ref in by_id and ref not in shown:
                shown.add(ref)
                attached.append(by_id[ref])
        items.append({**m, "cards": attached})
    digest = _version(view.get("turn_running"), [m["seq"] for m in messages], list(by_id.values()))
    return {
        "conversation": view,
        "items": items,
        "version": digest,
        "can_talk": view["created_by"] == who.user_id,
    }


async def _card(request: Request, bearer: Tokens, kind: str, ref: str) -> dict[str, Any] | None:
    who = session(request)
    try:
        if kind == "proposal_id":
            view = await apis(request).proposal(bearer, ref)
            names = await _names(request, [view])
            return cards.proposal(view, who, request.app.state.operations, names)
        return cards.pause_point(await apis(request).pause_point(bearer, ref), who)
    except ApiError:
        return None


async def _page(
    request: Request, template: str, live: Awaitable[dict[str, Any]], **extra: Any
) -> Response:
    """A whole page, or only its live fragment: the same live part, in its own template."""
    who = session(request)
    return render(request, template, who, **extra, **await live)


async def _names(request: Request, views: list[dict[str, Any]]) -> dict[str, str]:
    state = request.app.state
    return await cards.approver_names(
        state.directory, state.runtime.engine, session(request).organization_id, views
    )


def _version(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


@router.get("/inbox", response_class=HTMLResponse)
async def inbox(request: Request, notice: str | None = None) -> Response:
    return await _page(request, "inbox.html", _inbox_live(request), notice=notice)


@router.get("/inbox/live", response_class=HTMLResponse)
async def inbox_live(request: Request) -> Response:
    return await _page(request, "inbox_live.html", _inbox_live(request))


async def _inbox_live(request: Request) -> dict[str, Any]:
    who = session(request)
    bearer = tokens(request, who)
    views, pauses = await asyncio.gather(
        apis(request).pending(bearer), apis(request).pending_pauses(bearer)
    )
    names = await _names(request, views)
    found = [cards.proposal(v, who, request.app.state.operations, names) for v in views]
    # a question an assistant is waiting on is as pending as a proposal: both are answered here
    found += [cards.pause_point(v, who) for v in pauses]
    return {"cards": found, "version": _version(found)}


@router.get("/proposals/{proposal_id}", response_class=HTMLResponse)
async def proposal_page(request: Request, proposal_id: str, notice: str | None = None) -> Response:
    return await _page(
        request, "proposal.html", _proposal_live(request, proposal_id), notice=notice
    )


@router.get("/proposals/{proposal_id}/live", response_class=HTMLResponse)
async def proposal_live(request: Request, proposal_id: str) -> Response:
    return await _page(request, "proposal_live.html", _proposal_live(request, proposal_id))


async def _proposal_live(request: Request, proposal_id: str) -> dict[str, Any]:
    who = session(request)
    view = await apis(request).proposal(tokens(request, who), proposal_id)
    names = await _names(request, [view])
    card = cards.proposal(view, who, request.app.state.operations, names)
    audit = view.get("audit", [])
    return {"card": card, "audit": audit, "version": _version(card, audit)}


@router.get("/proposals/{proposal_id}/reconciliation", response_class=HTMLResponse)
async def reconciliation_page(request: Request, proposal_id: str) -> Response:
    who = session(request)
    found = await apis(request).reconciliation(tokens(request, who), proposal_id)
    return render(request, "reconciliation.html", who, proposal_id=proposal_id, page=found)
