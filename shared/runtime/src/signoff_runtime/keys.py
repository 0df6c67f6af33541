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

The keys are PyNaCl's (libsodium): ``SigningKey`` and ``VerifyKey``. cryptography's Rust module
costs ≈ 8 MB of every process that loads it, and signing and checking Ed25519 needs none of it;
it is loaded only where an external issuer's RS256 or ES256 keys are checked (``jwks``). PyNaCl
too is imported by the functions that read or make a key, not with this module: every service's
settings read the constants, and the reconciler checks neither a token nor a contract. A PEM
key is the DER form RFC 8410 gives Ed25519 — PKCS #8 for a private key (with or without its
public half), SubjectPublicKeyInfo for a public one — what OpenSSL writes; anything else, or a
PEM whose public half does not belong to its private key, is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nacl.signing import SigningKey, VerifyKey

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


#: RFC 8410's DER for Ed25519, before the 32 key bytes: PKCS #8 v1 (``PRIVATE KEY``), PKCS #8
#: v2 with the public half after the seed (``[1]`` of 33 bytes), and SubjectPublicKeyInfo
_PKCS8_V1 = bytes.fromhex("302e020100300506032b657004220420")
_PKCS8_V2 = bytes.fromhex("3051020101300506032b657004220420")
_PKCS8_V2_PUBLIC = bytes.fromhex("812100")
_SPKI = bytes.fromhex("302a300506032b6570032100")


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _raw(text: str) -> bytes | None:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None
    return raw if len(raw) == 32 else None


def _pem(text: str, label: str) -> bytes | None:
    """The DER inside ``-----BEGIN {label}-----`` … ``-----END {label}-----``, alone."""
    lines = text.strip().splitlines()
    if len(lines) < 3 or lines[0] != f"-----BEGIN {label}-----":
        return None
    if lines[-1] != f"-----END {label}-----":
        return None
    try:
        return base64.b64decode("".join(line.strip() for line in lines[1:-1]), validate=True)
    except (ValueError, binascii.Error):
        return None


def _seed(der: bytes) -> tuple[bytes, bytes | None] | None:
    """The 32-byte seed of a PKCS #8 Ed25519 key, and its public half if the DER gives one."""
    if len(der) == 48 and der.startswith(_PKCS8_V1):
        return der[16:], None
    public_at = len(_PKCS8_V2) + 32
    if (
        len(der) == public_at + 35
        and der.startswith(_PKCS8_V2)
        and der[public_at : public_at + 3] == _PKCS8_V2_PUBLIC
    ):
        return der[16:48], der[public_at + 3 :]
    return None


def private_key(text: str) -> SigningKey:
    from nacl.signing import SigningKey

    text = text.strip()
    if text.startswith("-----BEGIN"):
        der = _pem(text, "PRIVATE KEY")
        found = None if der is None else _seed(der)
        if found is not None:
            key = SigningKey(found[0])
            if found[1] is None or bytes(key.verify_key) == found[1]:
                return key
    elif (raw := _raw(text)) is not None:
        return SigningKey(raw)
    raise InvalidKey("not an Ed25519 private key (PEM, or 32 raw bytes in base64url)")


def public_key(text: str) -> VerifyKey:
    from nacl.signing import VerifyKey

    text = text.strip()
    if text.startswith("-----BEGIN"):
        der = _pem(text, "PUBLIC KEY")
        if der is not None and len(der) == 44 and der.startswith(_SPKI):
            return VerifyKey(der[12:])
    elif (raw := _raw(text)) is not None:
        return VerifyKey(raw)
    raise InvalidKey("not an Ed25519 public key (PEM, or 32 raw bytes in base64url)")


def raw_public(key: VerifyKey) -> str:
    return b64url(bytes(key))


def raw_private(key: SigningKey) -> str:
    return b64url(bytes(key))


def derived_kid(key: VerifyKey) -> str:
    """A short stable name for a public key: the start of its SHA-256 in base64url."""
    return b64url(hashlib.sha256(bytes(key)).digest())[:16]


def signing_kid(private: str, configured: str | None) -> str:
    """The ``kid`` a signer announces: the configured one, else the dev pair's, else derived."""
    if configured:
        return configured
    if private.strip() == DEV_ONLY_TOKEN_PRIVATE_KEY:
        return DEV_ONLY_TOKEN_KID
    if private.strip() == DEV_ONLY_CONTRACT_PRIVATE_KEY:
        return DEV_ONLY_CONTRACT_KID
    return derived_kid(private_key(private).verify_key)


def generate() -> tuple[str, str, str]:
    """A fresh pair: ``(kid, private, public)``, both keys in base64url."""
    from nacl.signing import SigningKey

    key = SigningKey.generate()
    return derived_kid(key.verify_key), raw_private(key), raw_public(key.verify_key)
