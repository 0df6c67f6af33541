"""``GET /leave?to=…``: the confirmation step before a model-written link to another site.

Links in assistant messages and pause-point descriptions point here (``richtext``), never
straight at another site. The page shows the destination in full — its host on its own line, as
markdown-it normalised it (punycode for an internationalised name) — and opens it only when the
person clicks; nothing redirects by itself, so this is no open redirect. Only ``http``,
``https`` and ``mailto`` addresses get a link; anything else is shown as text.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from signoff_web.context import optional_session, render
from signoff_web.richtext import openable

router = APIRouter()
MAX_URL = 4096


@router.get("/leave", response_class=HTMLResponse)
async def leave(request: Request, to: str = "") -> Response:
    destination = to[:MAX_URL]
    who = optional_session(request)
    can_open = openable(destination)
    host = urlsplit(destination).hostname if can_open else None
    response = render(
        request,
        "leave.html",
        who,
        status_code=200 if can_open else 400,
        destination=destination,
        host=host,
        openable=can_open,
    )
    response.headers["Cache-Control"] = "no-store"
    return response
