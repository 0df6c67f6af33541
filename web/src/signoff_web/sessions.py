"""Sessions: an HMAC-signed, dated cookie naming the person, and a CSRF token bound to it.

The cookie holds who is signed in (user, organization, role, locale, name), when it expires and
a random CSRF secret; it is HttpOnly and SameSite=Lax. Every form carries the CSRF token, which
is checked against the session in constant time (a session-bound token: a cross-site page can
neither read it nor forge it). Nothing here is a bearer credential for the APIs: the web issues
a short-lived token for each request from the session (``tokens.issue_token``).

The cookie also names its server-side row (``sid``, see ``session_store``): a signature alone
cannot be taken back, the row can — sign-out revokes it, and a cookie whose row is revoked,
expired or missing is no session at all.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from signoff_contracts.operations import Locale, Membership

COOKIE = "signoff_session"


@dataclass(frozen=True)
class Session:
    user_id: str
    organization_id: str
    role: str
    locale: Locale
    name: str
    csrf: str
    exp: int
    #: the id of the session's row in ``web.sessions`` (none: not a live session)
    sid: str = ""

    @classmethod
    def start(cls, member: Membership, ttl_s: int) -> Session:
        return cls(
            user_id=member.user_id,
            organization_id=member.organization_id,
            role=member.role,
            locale=member.locale,
            name=member.display_name,
            csrf=secrets.token_urlsafe(24),
            exp=int(time.time()) + ttl_s,
            sid=secrets.token_urlsafe(32),
        )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, body: str) -> str:
    return _b64(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest())


def dump(session: Session, secret: str) -> str:
    body = _b64(json.dumps(asdict(session), separators=(",", ":")).encode())
    return f"{body}.{_mac(secret, body)}"


def load(cookie: str | None, secret: str) -> Session | None:
    """The session a cookie holds, or ``None`` if it is absent, tampered with or expired."""
    if not cookie or "." not in cookie:
        return None
    body, _, mac = cookie.rpartition(".")
    if not hmac.compare_digest(mac, _mac(secret, body)):
        return None
    try:
        data: dict[str, Any] = json.loads(_unb64(body))
        session = Session(**data)
    except (ValueError, TypeError):
        return None
    return session if session.exp > time.time() else None


def csrf_ok(session: Session, token: str | None) -> bool:
    return bool(token) and hmac.compare_digest(session.csrf, token or "")
