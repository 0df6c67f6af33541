"""Bearer tokens never reach the dead-letter archive, nor an operator's terminal.

An approval command carries the person's token (``token``), and any message may quote one by
mistake; a dead letter keeps its body for as long as operators keep the archive, and ``signoff
dlq`` prints it. So every string value under a token-like key, and any JWT-shaped string
anywhere (body, headers, the consumer's detail), is replaced by ``REDACTED`` before the letter is
stored, and again before it is printed (letters archived before this existed). A replayed
approval command therefore carries no token: the proposals service refuses it as unauthenticated
— a person decides again, which is the point.
"""

from __future__ import annotations

import json
import re
from typing import Any

REDACTED = "[redacted]"
#: keys whose string values are credentials, whatever they look like (compared lower-cased)
SECRET_KEYS = frozenset({"token", "access_token", "id_token", "refresh_token", "authorization"})
#: a compact JWS/JWT: three base64url parts, the first a JSON header (``{"`` is ``eyJ``)
JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")


def redact_text(text: str) -> str:
    return JWT.sub(REDACTED, text)


def redact(value: Any) -> Any:
    """``value`` (JSON-like) with credentials replaced; the structure is kept."""
    if isinstance(value, dict):
        return {
            k: REDACTED if str(k).lower() in SECRET_KEYS and isinstance(v, str) and v else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_body(body: bytes) -> bytes:
    """A JSON body with its credentials replaced; anything else with its JWTs replaced."""
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return re.compile(JWT.pattern.encode()).sub(REDACTED.encode(), body)
    cleaned = redact(parsed)
    return body if cleaned == parsed else json.dumps(cleaned, separators=(",", ":")).encode()
