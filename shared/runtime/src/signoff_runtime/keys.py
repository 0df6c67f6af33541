"""Ed25519 keys as operators write them, and the key pairs committed for development only.

Two kinds of signature use these keys: bearer tokens (issuers — the web, ``signoff token`` —
sign; services verify) and execution contracts (the proposals service signs; executors verify).
A key is written either as PEM (``openssl genpkey -algorithm ed25519``) or as its raw 32 bytes
in unpadded base64url (what ``signoff keys generate`` prints). A key id (``kid``) names a key so
that two can be trusted at once during a rotation; when none is given, it is derived from the
public key, so the issuer and the verifiers agree without a second setting.

The ``DEV_ONLY_*`` pairs keep ``make run`` and the tests working with no configuration. They are
public by construction (they are in this file): ``SIGNOFF_ENV=prod`` refuses every one of them,
private or public, so nothing signed with them is ever trusted in production.

cryptography is imported by the functions that read or make a key, not with this module: every
service's settings read the constants, and one that checks neither a token nor a contract (the
reconciler) would otherwise hold cryptography's Rust module, ≈ 7 MB, for nothing (issue 18).
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

DEV_ONLY_TOKEN_KID = "dev-only-token"  # noqa: S105
DEV_ONLY_TOKEN_PRIVATE_KEY = "BLiCJMOnPnu0wSJ0waMztyjRMMrVmouIjOg_agMpd9w"  # noqa: S105
DEV_ONLY_TOKEN_PUBLIC_KEY = "d7lTWGd6XxyfZtlw-V3rQYg8PSL4u3t3bnSBp93zTDs"  # noqa: S105
DEV_ONLY_CONTRACT_KID = "dev-only-contract"
DEV_ONLY_CONTRACT_PRIVATE_KEY = "hjgxoVFxtGfNcsAaMXEby_6jtJ4g4duFzPXCMqZJR3A"
DEV_ONLY_CONTRACT_PUBLIC_KEY = "GzGW3zCpUEEnAF5HM1o3wbJlNF5j8WCy3fSXBKPg0O4"

#: the private halves: what the repository-wide log scan looks for
DEV_ONLY_PRIVATE_KEYS = (DEV_ONLY_TOKEN_PRIVATE_KEY, DEV_ONLY_CONTRACT_PRIVATE_KEY)
#: every committed key, both halves: refused in production wherever a key is configured
DEV_ONLY_KEYS = frozenset(
    {
        *DEV_ONLY_PRIVATE_KEYS,
        DEV_ONLY_TOKEN_PUBLIC_KEY,
        DEV_ONLY_CONTRACT_PUBLIC_KEY,
    }
)


class InvalidKey(ValueError):
    """Not an Ed25519 key in PEM or unpadded base64url (the message never quotes the key)."""


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _raw(text: str) -> bytes | None:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None
    return raw if len(raw) == 32 else None


def private_key(text: str) -> Ed25519PrivateKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_private_key(text.encode(), password=None)
            if isinstance(key, Ed25519PrivateKey):
                return key
        elif (raw := _raw(text)) is not None:
            return Ed25519PrivateKey.from_private_bytes(raw)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        pass
    raise InvalidKey("not an Ed25519 private key (PEM, or 32 raw bytes in base64url)")


def public_key(text: str) -> Ed25519PublicKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
            if isinstance(key, Ed25519PublicKey):
                return key
        elif (raw := _raw(text)) is not None:
            return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        pass
    raise InvalidKey("not an Ed25519 public key (PEM, or 32 raw bytes in base64url)")


def raw_public(key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    return b64url(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def raw_private(key: Ed25519PrivateKey) -> str:
    from cryptography.hazmat.primitives import serialization

    return b64url(
        key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
    )


def derived_kid(key: Ed25519PublicKey) -> str:
    """A short stable name for a public key: the start of its SHA-256 in base64url."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return b64url(hashlib.sha256(raw).digest())[:16]


def signing_kid(private: str, configured: str | None) -> str:
    """The ``kid`` a signer announces: the configured one, else the dev pair's, else derived."""
    if configured:
        return configured
    if private.strip() == DEV_ONLY_TOKEN_PRIVATE_KEY:
        return DEV_ONLY_TOKEN_KID
    if private.strip() == DEV_ONLY_CONTRACT_PRIVATE_KEY:
        return DEV_ONLY_CONTRACT_KID
    return derived_kid(private_key(private).public_key())


def generate() -> tuple[str, str, str]:
    """A fresh pair: ``(kid, private, public)``, both keys in base64url."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    return derived_kid(key.public_key()), raw_private(key), raw_public(key.public_key())
