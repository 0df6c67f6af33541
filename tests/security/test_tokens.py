"""Tokens: signature, expiry, audience, issuer, a fixed algorithm; an external issuer's JWKS."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import jwt
import pytest
import structlog
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from signoff_runtime.settings import DEV_TOKEN_SECRET, AuthSettings
from signoff_runtime.tokens import TokenInvalid, issue_token, verify_token

LOCAL = AuthSettings()


def claims(**over: Any) -> dict[str, Any]:
    base = {
        "sub": "usr_1",
        "org": "org_1",
        "iss": "signoff",
        "aud": "signoff",
        "exp": int(time.time()) + 60,
    }
    return {**base, **over}


@pytest.mark.parametrize(
    "token",
    [
        jwt.encode(claims(), None, algorithm="none"),
        jwt.encode(claims(), DEV_TOKEN_SECRET * 2, algorithm="HS512"),
        jwt.encode(claims(), "another-secret-000000000000000000000000000000", algorithm="HS256"),
        jwt.encode(claims(exp=int(time.time()) - 5), DEV_TOKEN_SECRET, algorithm="HS256"),
        jwt.encode(claims(aud="someone-else"), DEV_TOKEN_SECRET, algorithm="HS256"),
        jwt.encode(claims(iss="someone-else"), DEV_TOKEN_SECRET, algorithm="HS256"),
        jwt.encode({k: v for k, v in claims().items() if k != "org"}, DEV_TOKEN_SECRET),
        "",
        "a.b.c",
    ],
    ids=[
        "none",
        "hs512",
        "wrong-secret",
        "expired",
        "audience",
        "issuer",
        "no-org",
        "empty",
        "junk",
    ],
)
def test_a_local_token_is_refused_unless_everything_holds(token: str) -> None:
    with pytest.raises(TokenInvalid):
        verify_token(LOCAL, token)


def test_a_good_local_token_verifies() -> None:
    token = issue_token(LOCAL, "usr_1", "org_1")
    assert verify_token(LOCAL, token).org == "org_1"


def test_the_secret_and_tokens_never_reach_a_log_line(capsys: pytest.CaptureFixture[str]) -> None:
    from signoff_runtime import logs

    logs.configure("security-test")
    token = issue_token(LOCAL, "usr_1", "org_1")
    structlog.get_logger("t").info("careless", token=token, secret=DEV_TOKEN_SECRET, card="4242")
    err = capsys.readouterr().err
    assert "careless" in err
    assert token not in err and DEV_TOKEN_SECRET not in err and "4242" not in err


# -- an external OpenID Connect issuer (JWKS served locally, no network) ----------------------


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def jwks_url(rsa_key: rsa.RSAPrivateKey) -> Iterator[str]:
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

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
    return AuthSettings(
        jwks_url=jwks_url, issuer="https://idp.example", audience="signoff", org_claim="tenant"
    )


def idp_claims(**over: Any) -> dict[str, Any]:
    return {**claims(iss="https://idp.example", tenant="org_9"), **over}


def test_an_external_issuers_token_verifies_with_the_configured_org_claim(
    rsa_key: rsa.RSAPrivateKey, jwks_url: str
) -> None:
    token = jwt.encode(idp_claims(), rsa_key, algorithm="RS256", headers={"kid": "k1"})
    verified = verify_token(external(jwks_url), token)
    assert (verified.sub, verified.org) == ("usr_1", "org_9")


def test_algorithm_confusion_and_local_tokens_are_refused_when_jwks_is_on(
    rsa_key: rsa.RSAPrivateKey, jwks_url: str
) -> None:
    settings = external(jwks_url)
    public_pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # HS256 "signed" with the issuer's public key: the classic key-confusion forgery
    import hashlib
    import hmac

    header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", "kid": "k1"}).encode())
    payload = jwt.utils.base64url_encode(json.dumps(idp_claims()).encode())
    signing_input = header + b"." + payload
    mac = hmac.new(public_pem, signing_input, hashlib.sha256).digest()
    confused = (signing_input + b"." + jwt.utils.base64url_encode(mac)).decode()
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "hs256-with-public-key": confused,
        "local-hs256": issue_token(AuthSettings(issuer="https://idp.example"), "usr_1", "org_9"),
        "none": jwt.encode(idp_claims(), None, algorithm="none"),
        "other-key": jwt.encode(idp_claims(), other_key, algorithm="RS256", headers={"kid": "k1"}),
        "unknown-kid": jwt.encode(idp_claims(), rsa_key, algorithm="RS256", headers={"kid": "k2"}),
        "expired": jwt.encode(
            idp_claims(exp=int(time.time()) - 5), rsa_key, algorithm="RS256", headers={"kid": "k1"}
        ),
        "audience": jwt.encode(
            idp_claims(aud="x"), rsa_key, algorithm="RS256", headers={"kid": "k1"}
        ),
        "no-org-claim": jwt.encode(
            {k: v for k, v in idp_claims().items() if k != "tenant"},
            rsa_key,
            algorithm="RS256",
            headers={"kid": "k1"},
        ),
    }
    for name, token in refused.items():
        with pytest.raises(TokenInvalid):
            verify_token(settings, token)
            pytest.fail(name)


def test_hs_algorithms_cannot_be_configured_for_an_external_issuer(
    rsa_key: rsa.RSAPrivateKey, jwks_url: str
) -> None:
    settings = external(jwks_url).model_copy(update={"jwks_algorithms": ["HS256", "RS256"]})
    public_pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    token = jwt.encode(idp_claims(), DEV_TOKEN_SECRET, algorithm="HS256", headers={"kid": "k1"})
    with pytest.raises(TokenInvalid):
        verify_token(settings, token)
    assert public_pem  # the key exists; HS is refused before any key is considered
