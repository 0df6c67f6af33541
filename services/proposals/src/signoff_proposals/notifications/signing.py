"""The webhook signature: HMAC-SHA256 over ``"{t}.{body}"``, sent as ``t=<unix>,v1=<hex>``.

The scheme payment providers made the de-facto one: the timestamp is inside the MAC, so a
receiver that refuses a ``t`` more than ``REPLAY_WINDOW_S`` from its own clock refuses replays
of an old delivery, and comparing in constant time leaks nothing about the expected value.
``verify`` is what a receiver runs (the tests' receiver runs exactly this).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

HEADER = "Signoff-Signature"
#: a receiver refuses a signature whose timestamp is further than this from its clock
REPLAY_WINDOW_S = 300


def new_secret() -> str:
    return f"whsec_{secrets.token_urlsafe(32)}"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The header's value for ``body`` sent at ``timestamp`` (unix seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(
    secret: str, header: str, body: bytes, now: float, window_s: int = REPLAY_WINDOW_S
) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` and is recent (any ``v1`` may match)."""
    parts = [part.partition("=") for part in header.split(",")]
    stamps = [value for key, _, value in parts if key == "t"]
    if len(stamps) != 1 or not stamps[0].isdigit():
        return False
    timestamp = int(stamps[0])
    if abs(now - timestamp) > window_s:
        return False
    expected = signature(secret, timestamp, body).partition(",v1=")[2]
    return any(hmac.compare_digest(expected, value) for key, _, value in parts if key == "v1")
