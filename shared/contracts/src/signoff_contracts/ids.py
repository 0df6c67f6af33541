"""Opaque, prefixed, time-sortable ids.

An id says what it names (``prp_`` a proposal) and nothing else: no tenant, no sequence a client
could guess. The body is a ULID (48 bits of milliseconds, 80 random bits) in Crockford base32, so
ids sort by creation time, which keeps B-tree inserts at the right edge of the index.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Final

from pydantic import StringConstraints

_ALPHABET: Final = "0123456789abcdefghjkmnpqrstvwxyz"


def _body(now_ms: int, rand: int) -> str:
    value = (now_ms << 80) | rand
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str, *, now_ms: int | None = None) -> str:
    """A fresh id with ``prefix``; ``now_ms`` pins the time part (tests, bulk loaders)."""
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    return f"{prefix}_{_body(stamp, secrets.randbits(80))}"


ProposalId = Annotated[str, StringConstraints(pattern=r"^prp_[0-9a-z]{1,40}$", max_length=48)]
PausePointId = Annotated[str, StringConstraints(pattern=r"^pp_[0-9a-z]{1,40}$", max_length=48)]
ContractId = Annotated[str, StringConstraints(pattern=r"^ctr_[0-9a-z]{1,40}$", max_length=48)]
