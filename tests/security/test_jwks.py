"""An external OpenID Connect issuer (``SIGNOFF_AUTH__JWKS_URL``): its tokens verify, forgeries
do not, and the key set is fetched asynchronously with negative caching.

The key set is served by an injected ``httpx`` transport that counts requests (and, for the
event-loop test, holds its answer until told), or by a real local HTTP server.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import jwt
import pytest
import structlog
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from signoff_runtime import jwks
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import (
    AGENT_AUDIENCE,
    PROPOSALS_AUDIENCE,
    TokenInvalid,
    issue_token,
    verify_token,
    verify_token_async,
)

ISSUER = "https://idp.example"


@pytest.fixture(autouse=True)
def _plain_logs() -> None:
    """A fetch failure is logged: to a stream that exists, whatever an earlier test configured."""
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def key_set(key: rsa.RSAPrivateKey, kid: str = "k1") -> dict[str, Any]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**jwk, "kid": kid, "use": "sig", "alg": "RS256"}]}


def idp_claims(**over: Any) -> dict[str, Any]:
    base = {
        "sub": "usr_1",
        "tenant": "org_9",
        "iss": ISSUER,
        "aud": PROPOSALS_AUDIENCE,
        "exp": int(time.time()) + 60,
    }
    return {**base, **over}


def signed(key: rsa.RSAPrivateKey, kid: str = "k1", **over: Any) -> str:
    return jwt.encode(idp_claims(**over), key, algorithm="RS256", headers={"kid": kid})


class Counting(httpx.AsyncBaseTransport):
    """Serves a key set, counts requests; ``hold`` keeps each answer until released."""

    def __init__(self, body: dict[str, Any], hold: bool = False) -> None:
        self.body = body
        self.hits = 0
        self.release = asyncio.Event()
        if not hold:
            self.release.set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.hits += 1
        await self.release.wait()
        return httpx.Response(200, json=self.body)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def settings_for(transport: httpx.AsyncBaseTransport, clock: Clock | None = None) -> AuthSettings:
    url = f"https://idp.example/{uuid.uuid4().hex}/jwks.json"  # a cache of its own per test
    found = AuthSettings(jwks_url=url, issuer=ISSUER, org_claim="tenant", jwks_miss_s=30.0)
    jwks.cache_for(url, miss_s=30.0, transport=transport, clock=clock or time.monotonic)
    return found


async def test_an_external_token_verifies_after_one_fetch(rsa_key: rsa.RSAPrivateKey) -> None:
    transport = Counting(key_set(rsa_key))
    settings = settings_for(transport)
    for _ in range(5):
        verified = await verify_token_async(settings, signed(rsa_key), audience=PROPOSALS_AUDIENCE)
        assert (verified.sub, verified.org) == ("usr_1", "org_9")
    assert transport.hits == 1
    # the synchronous check uses what is cached, without I/O
    assert verify_token(settings, signed(rsa_key), audience=PROPOSALS_AUDIENCE).org == "org_9"
    with pytest.raises(TokenInvalid):
        await verify_token_async(settings, signed(rsa_key), audience=AGENT_AUDIENCE)


async def test_the_loop_keeps_running_while_the_key_set_is_fetched(
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    transport = Counting(key_set(rsa_key), hold=True)
    settings = settings_for(transport)
    ticks = 0
    ticked = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            if ticks >= 3:
                ticked.set()
            await asyncio.sleep(0)

    waiting = [
        asyncio.create_task(
            verify_token_async(settings, signed(rsa_key), audience=PROPOSALS_AUDIENCE)
        )
        for _ in range(20)
    ]
    ticking = asyncio.create_task(ticker())
    # other work runs while twenty verifications wait on one pending fetch
    await asyncio.wait_for(ticked.wait(), timeout=10)
    assert transport.hits == 1 and not any(t.done() for t in waiting)
    transport.release.set()
    results = await asyncio.wait_for(asyncio.gather(*waiting), timeout=10)
    ticking.cancel()
    assert {r.org for r in results} == {"org_9"} and transport.hits == 1


async def test_an_unknown_kid_is_refused_without_a_refetch_storm(
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    clock = Clock()
    transport = Counting(key_set(rsa_key))
    settings = settings_for(transport, clock)
    kept = signed(rsa_key)
    assert await verify_token_async(settings, kept, audience=PROPOSALS_AUDIENCE)
    assert transport.hits == 1

    unknown = [signed(rsa_key, kid=f"k-{i}") for i in range(50)]
    for token in unknown:
        with pytest.raises(TokenInvalid):
            await verify_token_async(settings, token, audience=PROPOSALS_AUDIENCE)
        with pytest.raises(TokenInvalid):
            verify_token(settings, token, audience=PROPOSALS_AUDIENCE)
    assert transport.hits == 1, "negative caching: no fetch within jwks_miss_s"

    # past the window, one fetch picks up a key the issuer rotated in; the dropped one is gone
    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    transport.body = key_set(new_key, kid="k2")
    clock.now += 31
    verified = await verify_token_async(
        settings, signed(new_key, kid="k2"), audience=PROPOSALS_AUDIENCE
    )
    assert verified.org == "org_9" and transport.hits == 2
    # the very token verified (and remembered) before: its key is no longer the issuer's
    for refused in (kept, signed(rsa_key)):
        with pytest.raises(TokenInvalid):
            await verify_token_async(settings, refused, audience=PROPOSALS_AUDIENCE)
    assert transport.hits == 2


async def test_a_failing_issuer_is_not_asked_again_per_request(
    rsa_key: rsa.RSAPrivateKey,
) -> None:
    hits = 0

    def down(request: httpx.Request) -> httpx.Response:
        nonlocal hits
        hits += 1
        return httpx.Response(503)

    settings = settings_for(httpx.MockTransport(down))
    for _ in range(20):
        with pytest.raises(TokenInvalid):
            await verify_token_async(settings, signed(rsa_key), audience=PROPOSALS_AUDIENCE)
    assert hits == 1


# -- forgeries, against a real local HTTP server ----------------------------------------------


@pytest.fixture(scope="module")
def jwks_url(rsa_key: rsa.RSAPrivateKey) -> Iterator[str]:
    body = json.dumps(key_set(rsa_key)).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"
    server.shutdown()
    server.server_close()


def external(jwks_url: str) -> AuthSettings:
    return AuthSettings(jwks_url=jwks_url, issuer=ISSUER, org_claim="tenant")


async def test_algorithm_confusion_and_local_tokens_are_refused_when_jwks_is_on(
    rsa_key: rsa.RSAPrivateKey, jwks_url: str
) -> None:
    settings = external(jwks_url)
    assert await verify_token_async(settings, signed(rsa_key), audience=PROPOSALS_AUDIENCE)
    public_pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # HS256 "signed" with the issuer's public key: the classic key-confusion forgery
    header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", "kid": "k1"}).encode())
    payload = jwt.utils.base64url_encode(json.dumps(idp_claims()).encode())
    signing_input = header + b"." + payload
    mac = hmac.new(public_pem, signing_input, hashlib.sha256).digest()
    confused = (signing_input + b"." + jwt.utils.base64url_encode(mac)).decode()
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "hs256-with-public-key": confused,
        "local-eddsa": issue_token(AuthSettings(issuer=ISSUER), "usr_1", "org_9"),
        "none": jwt.encode(idp_claims(), "", algorithm="none", headers={"kid": "k1"}),
        "other-key": signed(other_key),
        "unknown-kid": signed(rsa_key, kid="k2"),
        "expired": signed(rsa_key, exp=int(time.time()) - 5),
        "audience": signed(rsa_key, aud=AGENT_AUDIENCE),
        "no-org-claim": jwt.encode(
            {k: v for k, v in idp_claims().items() if k != "tenant"},
            rsa_key,
            algorithm="RS256",
            headers={"kid": "k1"},
        ),
    }
    for name, token in refused.items():
        with pytest.raises(TokenInvalid):
            await verify_token_async(settings, token, audience=PROPOSALS_AUDIENCE)
            pytest.fail(name)


async def test_hs_algorithms_cannot_be_configured_for_an_external_issuer(
    rsa_key: rsa.RSAPrivateKey, jwks_url: str
) -> None:
    settings = external(jwks_url).model_copy(update={"jwks_algorithms": ["HS256", "RS256"]})
    token = jwt.encode(idp_claims(), "s" * 48, algorithm="HS256", headers={"kid": "k1"})
    with pytest.raises(TokenInvalid):
        await verify_token_async(settings, token, audience=PROPOSALS_AUDIENCE)
