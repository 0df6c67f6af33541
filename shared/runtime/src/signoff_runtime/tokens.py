"""Bearer tokens: EdDSA (Ed25519) JWTs with a ``kid``, ``sub``, ``org``, ``iss``, ``aud``, ``exp``.

Only an issuer can make one. The web (which signs people in) and ``signoff token`` hold the
private key (``IssuerSettings``); services hold public keys only (``SIGNOFF_AUTH__PUBLIC_KEYS``,
``kid`` → key, two during a rotation), so a service taken over can check tokens but not mint a
manager's. Each API has its own audience: the agent's routes accept ``AGENT_AUDIENCE`` only, the
proposals service's routes and approval commands ``PROPOSALS_AUDIENCE`` only — a person's agent
token, which the agent holds while it works, never approves anything. ``issue_token`` without
an audience issues a token for both (the operator's ``signoff token`` default).

The algorithm is fixed: a token announcing ``none``, HS256 (even one "signed" with a public key)
or anything but EdDSA is refused before its signature is considered, as is an unknown ``kid``.
With ``SIGNOFF_AUTH__JWKS_URL`` set, tokens come from an external OpenID Connect issuer instead:
its key is looked up by ``kid`` in the issuer's key set (``jwks``, fetched asynchronously with
negative caching) and only the configured asymmetric algorithms are accepted. Errors say *that*
a token is bad, never why in a way that leaks a key; the token itself is never logged.

A token once verified is remembered (``_Verified``): a person presents the same token on every
request, and an approval checks it twice (the rate limit keys on its subject, then the route).
A remembered token is accepted again only while what could have changed since still holds: the
key that verified it is still the one trusted under its ``kid`` (a rotation or a JWKS refresh
that drops the key refuses the token at once), and it has not expired. The signature,
algorithm, audience, issuer and required claims are facts of the token's bytes and the
service's settings, both part of what is remembered; a token that failed is never remembered.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from typing import Any

import jwt
from nacl.signing import VerifyKey
from pydantic import BaseModel, ConfigDict

from signoff_runtime import eddsa, jwks, keys
from signoff_runtime.audiences import AGENT_AUDIENCE as AGENT_AUDIENCE
from signoff_runtime.audiences import AUDIENCES as AUDIENCES
from signoff_runtime.audiences import PROPOSALS_AUDIENCE as PROPOSALS_AUDIENCE
from signoff_runtime.key_settings import AuthSettings, IssuerSettings

ALGORITHM = eddsa.NAME
# EdDSA is PyNaCl's, not cryptography's (≈ 8 MB of a process that loads it: signoff_runtime.eddsa)
eddsa.install()


class Claims(BaseModel):
    model_config = ConfigDict(frozen=True)

    sub: str
    org: str
    exp: int


class TokenInvalid(Exception):
    """The token is missing, malformed, mis-signed, expired, or for someone else."""


class CannotSign(Exception):
    """These settings hold no private key: only an issuer's (``IssuerSettings``) do."""


def _signing_key(settings: AuthSettings) -> tuple[str, str]:
    if isinstance(settings, IssuerSettings):
        return settings.kid(), settings.private_key.get_secret_value()
    # Verifying settings sign nothing of their own. As a convenience of development and tests
    # (``issue_token(AuthSettings(), …)``), they sign with the committed dev-only key — only
    # where that very key is trusted, which production refuses.
    if settings.public_keys.get(keys.DEV_ONLY_TOKEN_KID) == keys.DEV_ONLY_TOKEN_PUBLIC_KEY:
        return keys.DEV_ONLY_TOKEN_KID, keys.DEV_ONLY_TOKEN_PRIVATE_KEY
    raise CannotSign("these settings hold public keys only; an issuer's private key is needed")


def issue_token(
    settings: AuthSettings,
    user_id: str,
    organization_id: str,
    ttl_s: int | None = None,
    *,
    audience: str | None = None,
) -> str:
    """A token for ``audience`` (one of ``AUDIENCES``), or for both APIs when none is given."""
    if audience is not None and audience not in AUDIENCES:
        raise ValueError(f"unknown audience {audience!r}; one of {AUDIENCES}")
    kid, private = _signing_key(settings)
    now = int(time.time())
    payload = {
        "sub": user_id,
        "org": organization_id,
        "iss": settings.issuer,
        "aud": list(AUDIENCES) if audience is None else audience,
        "iat": now,
        "exp": now + (ttl_s if ttl_s is not None else settings.token_ttl_s),
    }
    return jwt.encode(payload, _private(private), algorithm=ALGORITHM, headers={"kid": kid})


@functools.lru_cache(maxsize=16)
def _private(text: str) -> Any:
    return keys.private_key(text)


@functools.lru_cache(maxsize=64)
def _public(text: str) -> VerifyKey:
    return keys.public_key(text)


_REQUIRED = ["sub", "exp", "iss", "aud"]


def _header(token: str, allowed: list[str]) -> str:
    """The token's ``kid``, once its announced algorithm is one of ``allowed``."""
    header = jwt.get_unverified_header(token)
    if header.get("alg") not in allowed:
        raise TokenInvalid("unsupported algorithm")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise TokenInvalid("no key id")
    return kid


def _decode(
    settings: AuthSettings, token: str, key: Any, algorithms: list[str], audience: str
) -> Claims:
    any_audience = settings._accept_any_audience  # SIGNOFF_UNSAFE__ACCEPT_ANY_AUDIENCE, tests only
    payload = jwt.decode(
        token,
        key,
        algorithms=algorithms,
        audience=None if any_audience else audience,
        issuer=settings.issuer,
        options={"require": [*_REQUIRED, settings.org_claim], "verify_aud": not any_audience},
    )
    return Claims(
        sub=str(payload["sub"]), org=str(payload[settings.org_claim]), exp=int(payload["exp"])
    )


def _external_algorithms(settings: AuthSettings) -> list[str]:
    return [alg for alg in settings.jwks_algorithms if not alg.upper().startswith("HS")]


def _jwks(settings: AuthSettings) -> jwks.JwksCache:
    assert settings.jwks_url is not None
    return jwks.cache_for(
        settings.jwks_url,
        cache_s=settings.jwks_cache_s,
        miss_s=settings.jwks_miss_s,
        timeout_s=settings.jwks_timeout_s,
    )


def _trusted_key(settings: AuthSettings, kid: str) -> Any:
    """The key trusted under ``kid`` now, from memory (never I/O), or ``None``."""
    if settings.jwks_url:
        found = _jwks(settings).cached(kid)
        return None if found is None else found.key
    text = settings.public_keys.get(kid)
    return None if text is None else _public(text)


class _Verified:
    """Tokens verified lately (module docstring), at most ``SIZE``, the oldest use dropped first.

    Keyed by the token with everything its verification depended on besides the key: the
    audience asked for and the settings that judge the claims. The entry keeps the key object
    itself, so a key that is no longer trusted (or was replaced by an equal-looking new object
    after a refresh) cannot match: the token is then verified in full again."""

    SIZE = 1024

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[Any, ...], tuple[Claims, str, Any]] = OrderedDict()
        self._lock = threading.Lock()  # the web verifies from worker threads too

    @staticmethod
    def _key(settings: AuthSettings, token: str, audience: str) -> tuple[Any, ...]:
        return (
            token,
            audience,
            settings.issuer,
            settings.org_claim,
            settings.jwks_url,
            settings._accept_any_audience,
        )

    def get(self, settings: AuthSettings, token: str, audience: str) -> Claims | None:
        key = self._key(settings, token, audience)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            return None
        claims, kid, verified_with = entry
        if _trusted_key(settings, kid) is not verified_with or claims.exp <= _now():
            with self._lock:
                self._entries.pop(key, None)
            return None
        return claims

    def put(
        self, settings: AuthSettings, token: str, audience: str, found: tuple[Claims, str, Any]
    ) -> None:
        with self._lock:
            self._entries[self._key(settings, token, audience)] = found
            while len(self._entries) > self.SIZE:
                self._entries.popitem(last=False)


_verified = _Verified()
#: the clock a remembered token's expiry is compared with (PyJWT's own: expired once ``exp`` ≤ now)
_now = time.time


def verify_token(settings: AuthSettings, token: str | None, *, audience: str) -> Claims:
    """The token's claims if it is valid for ``audience``; never does I/O.

    With a JWKS URL, only keys already fetched are used: an unknown ``kid`` starts a background
    fetch (at most one per ``jwks_miss_s``) and is refused. ``verify_token_async`` waits for it.
    """
    if not token:
        raise TokenInvalid("missing token")
    remembered = _verified.get(settings, token, audience)
    if remembered is not None:
        return remembered
    try:
        algorithms = _external_algorithms(settings) if settings.jwks_url else [ALGORITHM]
        kid = _header(token, algorithms)
        key = _trusted_key(settings, kid)
        if key is None:
            if settings.jwks_url:
                _jwks(settings).refresh_soon()
            raise TokenInvalid("unknown key id")
        claims = _decode(settings, token, key, algorithms, audience)
    except jwt.PyJWTError as exc:
        raise TokenInvalid(type(exc).__name__) from None
    _verified.put(settings, token, audience, (claims, kid, key))
    return claims


async def verify_token_async(settings: AuthSettings, token: str | None, *, audience: str) -> Claims:
    """``verify_token``, first fetching an external issuer's key set if the ``kid`` is new to it
    (asynchronously, shared with concurrent callers, not again within ``jwks_miss_s``)."""
    if token and (remembered := _verified.get(settings, token, audience)) is not None:
        return remembered
    if token and settings.jwks_url:
        try:
            kid = _header(token, _external_algorithms(settings))
        except jwt.PyJWTError as exc:
            raise TokenInvalid(type(exc).__name__) from None
        await _jwks(settings).key(kid)
    return verify_token(settings, token, audience=audience)


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, or ``None``."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
