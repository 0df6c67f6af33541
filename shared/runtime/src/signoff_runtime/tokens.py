"""Bearer tokens: HS256 JWTs with ``sub``, ``org``, ``iss``, ``aud``, ``exp``.

The algorithm is fixed — a token announcing ``none`` or any other algorithm is refused before its
signature is even considered — and every claim is required. With ``SIGNOFF_AUTH__JWKS_URL`` set,
tokens come from an external OpenID Connect issuer instead: their key is looked up by ``kid`` in
the issuer's key set and only the configured asymmetric algorithms are accepted (so an HS256
token "signed" with the issuer's public key is refused), with the same audience, issuer and
expiry checks; the organization is read from the configured claim. Errors say *that* a token is bad,
never why in a way that leaks the secret; the token itself is never logged.
"""

from __future__ import annotations

import time

import jwt
from pydantic import BaseModel, ConfigDict

from signoff_runtime.settings import AuthSettings

ALGORITHM = "HS256"


class Claims(BaseModel):
    model_config = ConfigDict(frozen=True)

    sub: str
    org: str
    exp: int


class TokenInvalid(Exception):
    """The token is missing, malformed, mis-signed, expired, or for someone else."""


def issue_token(
    settings: AuthSettings, user_id: str, organization_id: str, ttl_s: int | None = None
) -> str:
    now = int(time.time())
    payload = {
        "sub": user_id,
        "org": organization_id,
        "iss": settings.issuer,
        "aud": settings.audience,
        "iat": now,
        "exp": now + (ttl_s if ttl_s is not None else settings.token_ttl_s),
    }
    return jwt.encode(payload, settings.secret.get_secret_value(), algorithm=ALGORITHM)


_REQUIRED = ["sub", "exp", "iss", "aud"]
_jwks_clients: dict[str, jwt.PyJWKClient] = {}


def _jwks_client(url: str) -> jwt.PyJWKClient:
    """One cached client per key set: keys are fetched once and on an unknown ``kid``."""
    client = _jwks_clients.get(url)
    if client is None:
        client = _jwks_clients[url] = jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=5)
    return client


def _verify_external(settings: AuthSettings, token: str) -> Claims:
    assert settings.jwks_url is not None
    allowed = [alg for alg in settings.jwks_algorithms if not alg.upper().startswith("HS")]
    try:
        header = jwt.get_unverified_header(token)
        if header.get("alg") not in allowed:
            raise TokenInvalid("unsupported algorithm")
        key = _jwks_client(settings.jwks_url).get_signing_key_from_jwt(token)
        payload = jwt.decode(
            token,
            key.key,
            algorithms=allowed,
            audience=settings.audience,
            issuer=settings.issuer,
            options={"require": [*_REQUIRED, settings.org_claim]},
        )
    except jwt.PyJWTError as exc:
        raise TokenInvalid(type(exc).__name__) from None
    return Claims(
        sub=str(payload["sub"]), org=str(payload[settings.org_claim]), exp=int(payload["exp"])
    )


def verify_token(settings: AuthSettings, token: str | None) -> Claims:
    if not token:
        raise TokenInvalid("missing token")
    if settings.jwks_url:
        return _verify_external(settings, token)
    try:
        header = jwt.get_unverified_header(token)
        if header.get("alg") != ALGORITHM:
            raise TokenInvalid("unsupported algorithm")
        payload = jwt.decode(
            token,
            settings.secret.get_secret_value(),
            algorithms=[ALGORITHM],
            audience=settings.audience,
            issuer=settings.issuer,
            options={"require": ["sub", "org", "exp", "iss", "aud"]},
        )
    except jwt.PyJWTError as exc:
        raise TokenInvalid(type(exc).__name__) from None
    return Claims(sub=str(payload["sub"]), org=str(payload["org"]), exp=int(payload["exp"]))


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, or ``None``."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
