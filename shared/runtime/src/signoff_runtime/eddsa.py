"""PyJWT's ``EdDSA`` on PyNaCl's Ed25519 keys (``signoff_runtime.keys``), not cryptography's.

PyJWT signs and checks EdDSA through cryptography, whose Rust module is ≈ 8 MB of every process
that loads it; the agent and the proposals service check a token on every request and need none
of the rest of it. ``install`` puts this algorithm in PyJWT's registry under ``EdDSA`` (in place
of PyJWT's own, where cryptography is loaded), so ``jwt.encode`` and ``jwt.decode`` — and with
them PyJWT's checks of the algorithm, the audience, the issuer and the required claims — stay
PyJWT's; only the signature is libsodium's.

A key is a ``SigningKey`` or ``VerifyKey``. A cryptography Ed25519 key object is taken too, by
its raw bytes (an external issuer's key set, read by ``PyJWK`` where cryptography is loaded,
and tests that forge tokens); anything else — a PEM string, an HMAC secret — is refused.
"""

from __future__ import annotations

import json
from typing import Any

import jwt
from jwt.algorithms import Algorithm
from jwt.exceptions import InvalidKeyError
from jwt.utils import base64url_decode, base64url_encode
from nacl.exceptions import CryptoError
from nacl.signing import SigningKey, VerifyKey

NAME = "EdDSA"


def _nacl(key: Any) -> SigningKey | VerifyKey | None:
    """``key`` as PyNaCl's: itself, or cryptography's Ed25519 key by its raw bytes (no
    cryptography import); ``None`` for anything else."""
    if isinstance(key, (SigningKey, VerifyKey)):
        return key
    kind = type(key).__name__
    if kind == "Ed25519PrivateKey" and callable(raw := getattr(key, "private_bytes_raw", None)):
        return SigningKey(raw())
    if kind == "Ed25519PublicKey" and callable(raw := getattr(key, "public_bytes_raw", None)):
        return VerifyKey(raw())
    return None


class Ed25519(Algorithm):
    """EdDSA with Ed25519 keys (RFC 8037), signed and checked by libsodium."""

    def prepare_key(self, key: Any) -> SigningKey | VerifyKey:
        prepared = _nacl(key)
        if prepared is None:
            raise InvalidKeyError("EdDSA needs an Ed25519 key object")
        return prepared

    def sign(self, msg: bytes, key: Any) -> bytes:
        prepared = self.prepare_key(key)
        if not isinstance(prepared, SigningKey):
            raise InvalidKeyError("signing needs a private key")
        return prepared.sign(msg).signature

    def verify(self, msg: bytes, key: Any, sig: bytes) -> bool:
        prepared = self.prepare_key(key)
        public = prepared.verify_key if isinstance(prepared, SigningKey) else prepared
        try:
            public.verify(msg, sig)
        except (CryptoError, ValueError, TypeError):
            return False
        return True

    @staticmethod
    def to_jwk(key_obj: Any, as_dict: bool = False) -> Any:
        key = _nacl(key_obj)
        if key is None:
            raise InvalidKeyError("not an Ed25519 key")
        public = key.verify_key if isinstance(key, SigningKey) else key
        found = {"kty": "OKP", "crv": "Ed25519", "x": base64url_encode(bytes(public)).decode()}
        if isinstance(key, SigningKey):
            found["d"] = base64url_encode(bytes(key)).decode()
        return found if as_dict else json.dumps(found)

    @staticmethod
    def from_jwk(jwk: str | dict[str, Any]) -> SigningKey | VerifyKey:
        try:
            found = json.loads(jwk) if isinstance(jwk, str) else jwk
            if found.get("kty") != "OKP" or found.get("crv") != "Ed25519":
                raise InvalidKeyError("not an Ed25519 key (kty OKP, crv Ed25519)")
            if "d" in found:
                key = SigningKey(base64url_decode(found["d"]))
                if "x" in found and bytes(key.verify_key) != base64url_decode(found["x"]):
                    raise InvalidKeyError("the key's x is not its d's public half")
                return key
            return VerifyKey(base64url_decode(found["x"]))
        except (KeyError, TypeError, ValueError, CryptoError) as exc:
            raise InvalidKeyError(f"not an Ed25519 JWK ({type(exc).__name__})") from None


def install() -> None:
    """``EdDSA`` in PyJWT's registry is this module's (idempotent)."""
    try:
        current = jwt.get_algorithm_by_name(NAME)
    except NotImplementedError:  # PyJWT without cryptography registers no EdDSA
        current = None
    if isinstance(current, Ed25519):
        return
    if current is not None:
        jwt.unregister_algorithm(NAME)
    jwt.register_algorithm(NAME, Ed25519())
