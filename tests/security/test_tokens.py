"""Tokens: EdDSA with a ``kid``, one audience per API, only an issuer can sign, keys rotate.

Every forgery a service could be handed is refused (``alg=none``, HS256 — one "signed" with the
public key too —, another key under a trusted ``kid``, an unknown ``kid``, a wrong audience,
issuer or expiry); a service's own settings cannot sign; during a rotation both keys verify.
An external issuer's key set (JWKS) is fetched asynchronously: the event loop keeps running
while it is fetched, and tokens naming an unknown ``kid`` are refused without a fetch each.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
import structlog
from pydantic import SecretStr, ValidationError
from signoff_runtime import keys
from signoff_runtime.settings import AuthSettings, IssuerSettings, ServiceSettings, refusals
from signoff_runtime.tokens import (
    AGENT_AUDIENCE,
    PROPOSALS_AUDIENCE,
    CannotSign,
    TokenInvalid,
    issue_token,
    verify_token,
)
from signoff_runtime.topology import ROLES

LOCAL = AuthSettings()
# PyJWT's annotations name cryptography's key classes; it takes PyNaCl's (signoff_runtime.eddsa)
DEV: Any = keys.private_key(keys.DEV_ONLY_TOKEN_PRIVATE_KEY)
KID = {"kid": keys.DEV_ONLY_TOKEN_KID}


def claims(**over: Any) -> dict[str, Any]:
    base = {
        "sub": "usr_1",
        "org": "org_1",
        "iss": "signoff",
        "aud": [AGENT_AUDIENCE, PROPOSALS_AUDIENCE],
        "exp": int(time.time()) + 60,
    }
    return {**base, **over}


def hs256_with_the_public_key(payload: dict[str, Any]) -> str:
    """The key-confusion forgery: an HMAC keyed with the verifying (public) key."""
    header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", **KID}).encode())
    body = jwt.utils.base64url_encode(json.dumps(payload).encode())
    signing_input = header + b"." + body
    mac = hmac.new(keys.DEV_ONLY_TOKEN_PUBLIC_KEY.encode(), signing_input, hashlib.sha256)
    return (signing_input + b"." + jwt.utils.base64url_encode(mac.digest())).decode()


def _other_key() -> Any:
    return keys.private_key(keys.generate()[1])


REFUSED = {
    "none": jwt.encode(claims(), "", algorithm="none", headers=KID),
    "hs256-public-key": hs256_with_the_public_key(claims()),
    "hs256-secret": jwt.encode(claims(), "s" * 48, algorithm="HS256", headers=KID),
    "other-key-trusted-kid": jwt.encode(claims(), _other_key(), algorithm="EdDSA", headers=KID),
    "unknown-kid": jwt.encode(claims(), DEV, algorithm="EdDSA", headers={"kid": "k-unknown"}),
    "no-kid": jwt.encode(claims(), DEV, algorithm="EdDSA"),
    "expired": jwt.encode(claims(exp=int(time.time()) - 5), DEV, algorithm="EdDSA", headers=KID),
    "audience": jwt.encode(claims(aud="someone-else"), DEV, algorithm="EdDSA", headers=KID),
    "issuer": jwt.encode(claims(iss="someone-else"), DEV, algorithm="EdDSA", headers=KID),
    "no-org": jwt.encode(
        {k: v for k, v in claims().items() if k != "org"}, DEV, algorithm="EdDSA", headers=KID
    ),
    "empty": "",
    "junk": "a.b.c",
}


@pytest.mark.parametrize("token", list(REFUSED.values()), ids=list(REFUSED))
@pytest.mark.parametrize("audience", [AGENT_AUDIENCE, PROPOSALS_AUDIENCE])
def test_a_token_is_refused_unless_everything_holds(token: str, audience: str) -> None:
    with pytest.raises(TokenInvalid):
        verify_token(LOCAL, token, audience=audience)


def test_a_good_token_is_eddsa_with_a_kid_and_verifies_for_both_apis_by_default() -> None:
    token = issue_token(LOCAL, "usr_1", "org_1")
    assert jwt.get_unverified_header(token) == {
        "alg": "EdDSA",
        "kid": keys.DEV_ONLY_TOKEN_KID,
        "typ": "JWT",
    }
    assert verify_token(LOCAL, token, audience=AGENT_AUDIENCE).org == "org_1"
    assert verify_token(LOCAL, token, audience=PROPOSALS_AUDIENCE).sub == "usr_1"


def test_each_api_refuses_the_other_apis_token() -> None:
    agent = issue_token(LOCAL, "usr_1", "org_1", audience=AGENT_AUDIENCE)
    proposals = issue_token(LOCAL, "usr_1", "org_1", audience=PROPOSALS_AUDIENCE)
    assert verify_token(LOCAL, agent, audience=AGENT_AUDIENCE).sub == "usr_1"
    assert verify_token(LOCAL, proposals, audience=PROPOSALS_AUDIENCE).sub == "usr_1"
    with pytest.raises(TokenInvalid):
        verify_token(LOCAL, agent, audience=PROPOSALS_AUDIENCE)  # an agent token never approves
    with pytest.raises(TokenInvalid):
        verify_token(LOCAL, proposals, audience=AGENT_AUDIENCE)
    with pytest.raises(ValueError, match="unknown audience"):
        issue_token(LOCAL, "usr_1", "org_1", audience="signoff")


def test_the_negative_control_accepts_any_audience_under_test_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = issue_token(LOCAL, "usr_1", "org_1", audience=AGENT_AUDIENCE)
    monkeypatch.setenv("SIGNOFF_UNSAFE__ACCEPT_ANY_AUDIENCE", "true")
    monkeypatch.setenv("SIGNOFF_ENV", "test")
    switched = ServiceSettings().auth
    assert verify_token(switched, agent, audience=PROPOSALS_AUDIENCE).sub == "usr_1"
    # the switch turns the audience off, nothing else: a forged signature is still refused
    with pytest.raises(TokenInvalid):
        verify_token(switched, REFUSED["other-key-trusted-kid"], audience=PROPOSALS_AUDIENCE)
    monkeypatch.setenv("SIGNOFF_ENV", "dev")
    with pytest.raises(ValueError, match="SIGNOFF_UNSAFE__ACCEPT_ANY_AUDIENCE"):
        ServiceSettings()


def _pair(kid: str) -> tuple[IssuerSettings, str]:
    _, private, public = keys.generate()
    return IssuerSettings(private_key=SecretStr(private), key_id=kid), public


def test_during_a_rotation_the_old_and_the_new_key_both_verify() -> None:
    old, old_public = _pair("2026-01")
    new, new_public = _pair("2026-07")
    by_old = issue_token(old, "usr_1", "org_1")
    by_new = issue_token(new, "usr_1", "org_1")
    assert jwt.get_unverified_header(by_new)["kid"] == "2026-07"

    before = AuthSettings(public_keys={"2026-01": old_public})
    during = AuthSettings(public_keys={"2026-01": old_public, "2026-07": new_public})
    after = AuthSettings(public_keys={"2026-07": new_public})
    assert verify_token(before, by_old, audience=AGENT_AUDIENCE)
    for token in (by_old, by_new):
        assert verify_token(during, token, audience=PROPOSALS_AUDIENCE)
    assert verify_token(after, by_new, audience=AGENT_AUDIENCE)
    for settings, token in ((before, by_new), (after, by_old)):
        with pytest.raises(TokenInvalid):
            verify_token(settings, token, audience=AGENT_AUDIENCE)


def test_a_verified_token_is_remembered_only_while_its_key_is_trusted_and_it_is_unexpired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from signoff_runtime import tokens

    issuer, public = _pair("2026-09")
    token = issue_token(issuer, "usr_7", "org_7", ttl_s=60)
    trusting = AuthSettings(public_keys={"2026-09": public})
    decoded: list[str] = []
    real_decode = jwt.decode

    def counted(found: str, *args: Any, **kwargs: Any) -> Any:
        decoded.append(found)
        return real_decode(found, *args, **kwargs)

    monkeypatch.setattr(jwt, "decode", counted)

    for _ in range(3):
        assert verify_token(trusting, token, audience=PROPOSALS_AUDIENCE).sub == "usr_7"
    assert decoded == [token], "verified once, then remembered"

    # another audience is its own question: this one still holds, the agent's is checked in full
    assert verify_token(trusting, token, audience=AGENT_AUDIENCE).org == "org_7"
    assert len(decoded) == 2

    # the key rotated out: the remembered token is refused at once, not when it expires
    rotated = AuthSettings(public_keys={"2026-10": _pair("2026-10")[1]})
    with pytest.raises(TokenInvalid):
        verify_token(rotated, token, audience=PROPOSALS_AUDIENCE)
    # the same kid now names another key: refused too
    replaced = AuthSettings(public_keys={"2026-09": _pair("2026-09")[1]})
    with pytest.raises(TokenInvalid):
        verify_token(replaced, token, audience=PROPOSALS_AUDIENCE)

    # at its expiry, memory no longer answers: the token goes through the full check again
    # (which refuses an expired token: ``REFUSED["expired"]``)
    expiry = verify_token(trusting, token, audience=PROPOSALS_AUDIENCE).exp
    monkeypatch.setattr(tokens, "_now", lambda: float(expiry - 1))
    checked = len(decoded)
    verify_token(trusting, token, audience=PROPOSALS_AUDIENCE)
    assert len(decoded) == checked, "a second before its expiry, still remembered"
    monkeypatch.setattr(tokens, "_now", lambda: float(expiry))
    verify_token(trusting, token, audience=PROPOSALS_AUDIENCE)  # PyJWT's clock: not yet expired
    assert len(decoded) == checked + 1


def test_a_services_configuration_cannot_sign(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even handed the issuer's private key by mistake, a service's settings do not read it."""
    issuer, public = _pair("k1")
    monkeypatch.setenv("SIGNOFF_ENV", "prod")
    monkeypatch.setenv("SIGNOFF_AMQP__URL", "amqp://agent:Zk4vQ9wLr2TnB7xHc5Ys@rabbitmq:5672/")
    monkeypatch.setenv("SIGNOFF_AMQP__USERS", json.dumps({role: role for role in ROLES}))
    monkeypatch.setenv("SIGNOFF_AUTH__PUBLIC_KEYS", json.dumps({"k1": public}))
    monkeypatch.setenv("SIGNOFF_AUTH__PRIVATE_KEY", issuer.private_key.get_secret_value())
    service = ServiceSettings().auth

    assert type(service) is AuthSettings and not hasattr(service, "private_key")
    assert issuer.private_key.get_secret_value() not in repr(service.model_dump())
    with pytest.raises(CannotSign):
        issue_token(service, "usr_1", "org_1")
    # what the service could sign with the committed dev key, it does not trust
    dev_signed = issue_token(AuthSettings(), "usr_1", "org_1")
    with pytest.raises(TokenInvalid):
        verify_token(service, dev_signed, audience=PROPOSALS_AUDIENCE)
    assert verify_token(service, issue_token(issuer, "usr_1", "org_1"), audience=AGENT_AUDIENCE)


def test_a_malformed_key_stops_the_settings_without_quoting_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGNOFF_AUTH__PUBLIC_KEYS", '{"k1": "not-a-key-but-a-secret-looking-x"}')
    with pytest.raises(ValidationError) as caught:
        ServiceSettings()
    [line] = refusals(caught.value)
    assert "SIGNOFF_AUTH__PUBLIC_KEYS['k1']: not an Ed25519 public key" in line
    assert "secret-looking" not in line
    with pytest.raises(ValueError, match="SIGNOFF_AUTH__PRIVATE_KEY"):
        IssuerSettings(private_key=SecretStr(keys.DEV_ONLY_TOKEN_PUBLIC_KEY + "xx"))


def _openssl_pems() -> tuple[Any, str, str]:
    """A key made by cryptography (OpenSSL) with its PEMs: what ``openssl genpkey`` writes."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key, private.decode(), public.decode()


def _pem(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode()
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def test_keys_are_read_as_pem_or_base64url() -> None:
    key, private_pem, public_pem = _openssl_pems()
    issuer = IssuerSettings(private_key=SecretStr(private_pem))
    settings = AuthSettings(public_keys={issuer.kid(): public_pem})
    token = issue_token(issuer, "usr_1", "org_1")
    assert verify_token(settings, token, audience=AGENT_AUDIENCE).sub == "usr_1"
    raw = keys.b64url(key.public_key().public_bytes_raw())
    assert issuer.kid() == keys.derived_kid(keys.public_key(raw))
    assert bytes(keys.public_key(public_pem)) == key.public_key().public_bytes_raw()


def test_a_pkcs8_key_with_its_public_half_is_read_and_a_mismatched_half_refused() -> None:
    """RFC 8410's second form of a private key (OneAsymmetricKey v2) carries the public key
    after the seed; it is read when that half belongs to the seed, refused when it does not."""
    key, _, _ = _openssl_pems()
    seed, public = key.private_bytes_raw(), key.public_key().public_bytes_raw()
    v2 = bytes.fromhex("3051020101300506032b657004220420") + seed + bytes.fromhex("812100")
    assert bytes(keys.private_key(_pem("PRIVATE KEY", v2 + public)).verify_key) == public
    other = _openssl_pems()[0].public_key().public_bytes_raw()
    with pytest.raises(keys.InvalidKey):
        keys.private_key(_pem("PRIVATE KEY", v2 + other))


@pytest.mark.parametrize(
    ("label", "der_hex"),
    [
        # X25519 (OID 1.3.101.110): the same shape as an Ed25519 key, another algorithm
        ("PRIVATE KEY", "302e020100300506032b656e04220420" + "11" * 32),
        ("PUBLIC KEY", "302a300506032b656e032100" + "22" * 32),
        # Ed25519's prefix with a byte too few or too many
        ("PRIVATE KEY", "302e020100300506032b657004220420" + "11" * 31),
        ("PUBLIC KEY", "302a300506032b6570032100" + "22" * 33),
        # a public key where a private one is asked for, and the reverse
        ("PRIVATE KEY", "302a300506032b6570032100" + "22" * 32),
        ("PUBLIC KEY", "302e020100300506032b657004220420" + "11" * 32),
        # an encrypted private key (PKCS #8's EncryptedPrivateKeyInfo label)
        ("ENCRYPTED PRIVATE KEY", "302e020100300506032b657004220420" + "11" * 32),
    ],
)
def test_a_pem_that_is_not_an_ed25519_key_of_its_kind_is_refused(label: str, der_hex: str) -> None:
    text = _pem(label, bytes.fromhex(der_hex))
    for read in (keys.private_key, keys.public_key):
        with pytest.raises(keys.InvalidKey):
            read(text)


def test_tokens_and_signatures_are_standard_ed25519_both_ways() -> None:
    """PyNaCl signs and checks what cryptography (OpenSSL) does: a token signed by either
    verifies with the other's public key, and a bit flipped in it is refused by both."""
    key, private_pem, public_pem = _openssl_pems()
    ours = keys.private_key(private_pem)
    message = b"header.payload"
    signature = ours.sign(message).signature
    key.public_key().verify(signature, message)  # raises if OpenSSL disagrees
    theirs = key.sign(message)
    assert keys.public_key(public_pem).verify(message, theirs) == message
    token = jwt.encode(claims(), key, algorithm="EdDSA", headers=KID)
    public: Any = keys.public_key(public_pem)
    found = jwt.decode(token, public, algorithms=["EdDSA"], audience=AGENT_AUDIENCE)
    assert found["sub"] == claims()["sub"]
    head, payload, sig = token.split(".")
    flipped = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(
            f"{head}.{payload}.{flipped}",
            public,
            algorithms=["EdDSA"],
            audience=AGENT_AUDIENCE,
        )


def test_the_keys_and_tokens_never_reach_a_log_line(capsys: pytest.CaptureFixture[str]) -> None:
    from signoff_runtime import logs

    logs.configure("security-test")
    token = issue_token(LOCAL, "usr_1", "org_1")
    private = keys.DEV_ONLY_TOKEN_PRIVATE_KEY
    try:
        structlog.get_logger("t").info(
            "careless", token=token, private_key=private, signing_key=private, card="4242"
        )
        err = capsys.readouterr().err
    finally:
        structlog.reset_defaults()  # the configured logger writes to this test's captured stderr
    assert "careless" in err
    assert token not in err and private not in err and "4242" not in err


def test_signoff_keys_generate_prints_a_pair_the_settings_accept() -> None:
    from signoff_cli.main import app
    from typer.testing import CliRunner

    done = CliRunner().invoke(app, ["keys", "generate", "--kid", "2026-07"])
    assert done.exit_code == 0, done.output
    pair = json.loads(done.stdout)
    issuer = IssuerSettings(private_key=SecretStr(pair["private_key"]), key_id=pair["kid"])
    services = AuthSettings(public_keys={pair["kid"]: pair["public_key"]})
    token = issue_token(issuer, "usr_1", "org_1", audience=PROPOSALS_AUDIENCE)
    assert verify_token(services, token, audience=PROPOSALS_AUDIENCE).sub == "usr_1"


def test_the_eddsa_algorithms_jwk_round_trips_and_refuses_other_keys() -> None:
    """``signoff_runtime.eddsa``'s JWK form (RFC 8037): a key written and read back is the same
    key; another curve, or a private JWK whose ``x`` is not its ``d``'s, is refused."""
    from jwt.exceptions import InvalidKeyError
    from signoff_runtime.eddsa import Ed25519

    private = keys.private_key(keys.generate()[1])
    public = private.verify_key
    assert bytes(Ed25519.from_jwk(Ed25519.to_jwk(public))) == bytes(public)
    written = Ed25519.to_jwk(private, as_dict=True)
    assert bytes(Ed25519.from_jwk(written)) == bytes(private)
    other = Ed25519.to_jwk(keys.private_key(keys.generate()[1]).verify_key, as_dict=True)
    for refused in ({**written, "x": other["x"]}, {**other, "crv": "X25519"}, {"kty": "OKP"}):
        with pytest.raises(InvalidKeyError):
            Ed25519.from_jwk(refused)
