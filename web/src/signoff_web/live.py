"""Live pages pushed, not polled: each page's event stream re-renders its fragment on a change.

A chat follows the agent's conversation stream (resumed with ``Last-Event-ID`` after the web
reconnects to it); the inbox and a proposal page follow the proposals service's stream of the
organization's changes (``GET /v1/events``). The browser holds one ``EventSource`` to the web per
open page; the web holds one upstream stream for it, with the person's own token, and sends a
freshly rendered fragment (``event: fragment``) only when an upstream event arrived and the
fragment's version changed. An idle page therefore costs no API request at all beyond its
stream's keep-alives. The session is checked again every ``stream_recheck_s``; the upstream
services re-check the person's membership themselves.

If the first upstream stream cannot be opened, the page hears ``event: unavailable`` and falls
back to fetching ``/live`` each second (``static/app.js``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import structlog
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from signoff_web import pages, texts
from signoff_web.apis import ApiError, Tokens
from signoff_web.context import SignInRequired, apis, session, settings, templates, tokens
from signoff_web.sessions import Session

log = structlog.get_logger(__name__)
router = APIRouter()

Fragment = Callable[[], Awaitable[tuple[str, str]]]
Live = Callable[[], Awaitable[dict[str, Any]]]  # a page's live part: ``version`` and the rest
Upstream = Callable[[Tokens, str | None], Any]  # (tokens, last event id) -> async context manager
Relevant = Callable[[str, str], bool]
#: what the upstream reader tells the page's loop besides an event
OPENED, LOST, GONE = "\x00opened", "\x00lost", "\x00gone"


def _html(name: str, who: Session, ctx: dict[str, Any]) -> str:
    return templates.env.get_template(name).render(
        {"who": who, "locale": who.locale, "status_of": texts.status, **ctx}
    )


def _frame(event: str, data: str) -> str:
    return f"event: {event}\n" + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"


def _every(kind: str, data: str) -> bool:
    return True


def _stream(
    request: Request,
    shown_version: str,
    page: tuple[Live, str],
    upstream: Upstream,
    relevant: Relevant = _every,
) -> StreamingResponse:
    """The page's stream: ``page`` is its live part and the template that renders it."""
    who = session(request)
    live, template = page

    async def fragment() -> tuple[str, str]:
        found = await live()
        return found["version"], _html(template, who, found)

    body = _pump(request, who, shown_version, fragment, upstream, relevant)
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _read(
    request: Request, who: Session, upstream: Upstream, relevant: Relevant, out: asyncio.Queue[str]
) -> None:
    """Forward the upstream's relevant events; reconnect (resuming where it can) when it drops."""
    last_id: str | None = None
    backoff = 1.0
    while True:
        try:
            async with upstream(tokens(request, who), last_id) as events:
                backoff = 1.0
                await out.put(OPENED)
                async for event_id, kind, data in events:
                    last_id = event_id or last_id
                    if relevant(kind, data):
                        await out.put(kind)
        except ApiError as exc:
            if exc.status in (401, 403, 404):
                await out.put(GONE)
                return
            log.info("web.stream_upstream_refused", status=exc.status, code=exc.code)
        except httpx.HTTPError as exc:
            log.info("web.stream_upstream_lost", error=type(exc).__name__)
        await out.put(LOST)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 30.0)


async def _pump(
    request: Request,
    who: Session,
    shown_version: str,
    fragment: Fragment,
    upstream: Upstream,
    relevant: Relevant,
) -> AsyncIterator[str]:
    group = settings(request).web
    queue: asyncio.Queue[str] = asyncio.Queue()
    reader = asyncio.create_task(_read(request, who, upstream, relevant, queue))
    version, opened_once, resync = shown_version, False, True
    checked = time.monotonic()
    try:
        yield "retry: 5000\n\n"
        while True:
            if time.monotonic() - checked >= group.stream_recheck_s:
                session(request)  # an expired session ends the stream (SignInRequired)
                checked = time.monotonic()
            try:
                item = await asyncio.wait_for(queue.get(), group.stream_keepalive_s)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if item == GONE:
                yield _frame("gone", "")
                return
            if item == LOST:
                if not opened_once:
                    yield _frame("unavailable", "")  # the page falls back to polling
                    return
                resync = True  # changes may have been missed while reconnecting
                continue
            if item == OPENED:
                opened_once = True
                if not resync:
                    continue
                resync = False
            else:
                await asyncio.sleep(0.15)  # one render for a burst of events
                while not queue.empty():
                    if queue.get_nowait() == GONE:
                        yield _frame("gone", "")
                        return
            fresh_version, html = await fragment()
            if fresh_version != version:
                version = fresh_version
                yield _frame("fragment", html)
    except (SignInRequired, ApiError):
        yield _frame("gone", "")
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


@router.get("/chat/{conversation_id}/events")
async def chat_events(request: Request, conversation_id: str, v: str = "") -> StreamingResponse:
    api = apis(request)
    await api.conversation(tokens(request, session(request)), conversation_id)  # foreign: 404
    url = api.conversation_events_url(conversation_id)
    return _stream(
        request,
        v,
        (lambda: pages._chat_live(request, conversation_id), "chat_live.html"),
        lambda bearer, last_id: api.events(url, bearer.agent, last_id),
    )


@router.get("/inbox/events")
async def inbox_events(request: Request, v: str = "") -> StreamingResponse:
    api = apis(request)
    return _stream(
        request,
        v,
        (lambda: pages._inbox_live(request), "inbox_live.html"),
        lambda bearer, _: api.events(api.proposal_events_url(), bearer.proposals),
    )


@router.get("/proposals/{proposal_id}/events")
async def proposal_events(request: Request, proposal_id: str, v: str = "") -> StreamingResponse:
    api = apis(request)
    await api.proposal(tokens(request, session(request)), proposal_id)  # foreign: 404
    return _stream(
        request,
        v,
        (lambda: pages._proposal_live(request, proposal_id), "proposal_live.html"),
        lambda bearer, _: api.events(api.proposal_events_url(), bearer.proposals),
        lambda kind, data: kind == "resync" or f'"{proposal_id}"' in data,
    )
