"""Per-request plumbing shared by pages and actions: the session, its token, templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from fastapi import HTTPException, Request
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates
from signoff_runtime.tokens import issue_token

from signoff_web import cards, sessions, texts
from signoff_web.apis import Apis, Tokens
from signoff_web.sessions import Session
from signoff_web.settings import WebSettings

#: autoescape on for every template: no text from a model or the domain is ever markup
templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True
    )
)
templates.env.globals.update(
    t=texts.t, money=texts.money, when=texts.when, markdown=cards.markdown, role_of=texts.role
)


def _notice_text(notice: str | None, locale: texts.Locale) -> str:
    if not notice:
        return ""
    if notice == "busy":
        return texts.t("thinking", locale)
    result, _, reason = notice.partition(":")
    return texts.notice(result, locale, reason)


templates.env.globals["notice_text"] = _notice_text


class SignInRequired(Exception):
    """No valid session: pages redirect to sign-in."""


def settings(request: Request) -> WebSettings:
    found: WebSettings = request.app.state.settings
    return found


def apis(request: Request) -> Apis:
    found: Apis = request.app.state.apis
    return found


def session(request: Request) -> Session:
    """The live session ``session_store``'s middleware found for this request, or sign in."""
    found: Session | None = getattr(request.state, "session", None)
    if found is None:
        raise SignInRequired
    return found


def optional_session(request: Request) -> Session | None:
    found: Session | None = getattr(request.state, "session", None)
    return found


def tokens(request: Request, who: Session) -> Tokens:
    """Fresh short-lived bearer tokens for the person, one per API, for this request only.

    The web is an issuer: its settings hold the token private key (``IssuerSettings``).
    """
    s = settings(request)

    def mint(audience: str) -> str:
        return issue_token(
            s.auth, who.user_id, who.organization_id, ttl_s=s.web.token_ttl_s, audience=audience
        )

    return Tokens(mint)


def check_csrf(who: Session, form: dict[str, Any]) -> None:
    if not sessions.csrf_ok(who, str(form.get("csrf") or "")):
        raise HTTPException(403, "csrf")


def local_path(target: str | None, fallback: str = "/") -> str:
    """Only same-site paths: never an open redirect."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return fallback


def render(
    request: Request, name: str, who: Session | None, status_code: int = 200, **ctx: Any
) -> Response:
    locale = who.locale if who else "en"
    response: Response = templates.TemplateResponse(
        request,
        name,
        {"who": who, "locale": locale, "status_of": texts.status, **ctx},
        status_code=status_code,
    )
    return response
