"""Password hashes for club sign-in: argon2id at OWASP's minimum, older scrypt hashes still read.

New hashes are argon2id with OWASP's Password Storage Cheat Sheet minimum (m = 19 MiB, t = 2,
p = 1), in argon2's own encoding (``$argon2id$v=19$m=19456,t=2,p=1$salt$hash``), which carries
its parameters: the cost can be raised later and old hashes still verify with theirs.

Hashes written before argon2 (``scrypt$n$r$p$salt$hash``, n = 2^14: below OWASP's scrypt
minimum of 2^17) keep verifying; ``needs_rehash`` says so for them (and for argon2 hashes made
with weaker parameters), and the directory replaces them with argon2id on the next successful
sign-in.

Every function here is CPU- and memory-bound (tens of milliseconds): callers on an event loop
run them in a thread (``asyncio.to_thread``), never inline.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

#: OWASP's minimum for argon2id (Password Storage Cheat Sheet): 19 MiB, 2 passes, 1 lane
MEMORY_KIB = 19 * 1024
TIME_COST = 2
PARALLELISM = 1
_hasher = PasswordHasher(
    time_cost=TIME_COST,
    memory_cost=MEMORY_KIB,
    parallelism=PARALLELISM,
    hash_len=32,
    salt_len=16,
    type=Type.ID,
)
_SCRYPT_DKLEN = 32


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password: str, stored: str) -> bool:
    """Constant-time comparison; a malformed stored value verifies nothing."""
    if stored.startswith("scrypt$"):
        return _verify_scrypt(password, stored)
    try:
        return _hasher.verify(stored, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(stored: str) -> bool:
    """Whether ``stored`` is of an older scheme or weaker parameters than ``hash_password``'s."""
    if not stored.startswith("$argon2id$"):
        return True
    try:
        return _hasher.check_needs_rehash(stored)
    except InvalidHashError:
        return True


def _verify_scrypt(password: str, stored: str) -> bool:
    """The scheme before argon2id: ``scrypt$n$r$p$salt$hash`` (base64)."""
    try:
        _, n, r, p, salt, digest = stored.split("$")
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            password.encode("utf-8"),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=_SCRYPT_DKLEN,
            maxmem=64 * 1024 * 1024,
        )
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)


def scrypt_hash(password: str, salt: bytes, n: int = 2**14, r: int = 8, p: int = 1) -> str:
    """A hash in the old scheme, as rows written before argon2id hold (tests of the upgrade)."""
    digest = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=_SCRYPT_DKLEN, maxmem=2**26
    )
    b64 = base64.b64encode
    return f"scrypt${n}${r}${p}${b64(salt).decode()}${b64(digest).decode()}"
