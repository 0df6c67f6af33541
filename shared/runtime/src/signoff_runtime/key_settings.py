"""The settings groups that hold keys: who may sign what, and who may only verify.

Each group is declared only by the services that need it, so a service's configuration cannot
hold a key it has no use for (the agent, reconciler and web read no contract key at all):

- ``AuthSettings`` (every service; used by those that check tokens — agent, proposals): the
  issuers' *public* keys, or an external issuer's JWKS URL;
- ``IssuerSettings`` (the web, ``signoff token``): the same plus the token *private* key;
- ``ContractSigningSettings`` (the proposals service): the contract *private* key;
- ``ContractVerifyingSettings`` (executors): the contracts' *public* keys.

Every key is parsed when the settings are read, so a malformed one stops the start; each group's
``prod_refusals`` names what ``SIGNOFF_ENV=prod`` refuses (the committed dev-only keys).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, PrivateAttr, SecretStr, field_validator

from signoff_runtime import keys


def _dev_token_keys() -> dict[str, str]:
    return {keys.DEV_ONLY_TOKEN_KID: keys.DEV_ONLY_TOKEN_PUBLIC_KEY}


def _dev_contract_keys() -> dict[str, str]:
    return {keys.DEV_ONLY_CONTRACT_KID: keys.DEV_ONLY_CONTRACT_PUBLIC_KEY}


def _public_keys(found: dict[str, str], variable: str) -> dict[str, str]:
    for kid, key in found.items():
        if not kid.strip():
            raise ValueError(f"{variable}: a key id is empty")
        try:
            keys.public_key(key)
        except keys.InvalidKey as exc:
            raise ValueError(f"{variable}[{kid!r}]: {exc}") from None
    return found


def _private_key(value: SecretStr, variable: str) -> SecretStr:
    try:
        keys.private_key(value.get_secret_value())
    except keys.InvalidKey as exc:
        raise ValueError(f"{variable}: {exc}") from None
    return value


class AuthSettings(BaseModel):
    """``SIGNOFF_AUTH__*`` as services read them: how to check a bearer token — public keys only.

    A service cannot sign a token with these: an issuer's settings (``IssuerSettings``) add the
    private key, and only the web and ``signoff token`` read those.
    """

    issuer: str = "signoff"
    token_ttl_s: int = Field(default=3600, ge=30)
    #: ``kid`` → Ed25519 public key (PEM, or its 32 raw bytes in base64url) of each issuer key
    #: trusted; two during a rotation. Default: the committed dev-only key (refused in prod)
    public_keys: dict[str, str] = Field(default_factory=_dev_token_keys, min_length=1)
    #: an external OpenID Connect issuer's key set; when set, only its tokens are accepted
    #: (signed with one of ``jwks_algorithms``, never HS256 — see docs/security.md)
    jwks_url: str | None = None
    jwks_algorithms: list[str] = Field(default_factory=lambda: ["RS256"], min_length=1)
    #: how long a fetched key set is used before it is fetched again, and how long after a
    #: fetch (or a failed one) an unknown ``kid`` is refused without fetching again
    jwks_cache_s: float = Field(default=300.0, gt=0)
    jwks_miss_s: float = Field(default=30.0, gt=0)
    jwks_timeout_s: float = Field(default=5.0, gt=0)
    #: the claim naming the person's organization (an issuer may call it otherwise)
    org_claim: str = Field(default="org", min_length=1)
    #: SIGNOFF_UNSAFE__ACCEPT_ANY_AUDIENCE, copied here by ``ServiceSettings`` (never from env)
    _accept_any_audience: bool = PrivateAttr(default=False)

    @field_validator("public_keys")
    @classmethod
    def _keys_parse(cls, found: dict[str, str]) -> dict[str, str]:
        return _public_keys(found, "SIGNOFF_AUTH__PUBLIC_KEYS")

    def prod_refusals(self) -> list[str]:
        out = []
        if not self.jwks_url and set(self.public_keys.values()) & keys.DEV_ONLY_KEYS:
            out.append("SIGNOFF_AUTH__PUBLIC_KEYS trusts the committed dev-only token key")
        if self.jwks_url and not self.jwks_url.startswith("https://"):
            out.append("SIGNOFF_AUTH__JWKS_URL must be https outside development")
        return out


class IssuerSettings(AuthSettings):
    """An issuer's ``SIGNOFF_AUTH__*`` (the web, ``signoff token``): also the signing key."""

    #: Ed25519 private key (PEM or base64url) tokens are signed with; its public half must be in
    #: the services' ``SIGNOFF_AUTH__PUBLIC_KEYS`` under ``key_id``
    private_key: SecretStr = SecretStr(keys.DEV_ONLY_TOKEN_PRIVATE_KEY)
    #: the ``kid`` tokens announce; default: derived from the public key
    key_id: str | None = Field(default=None, min_length=1, max_length=64)

    @field_validator("private_key")
    @classmethod
    def _key_parses(cls, value: SecretStr) -> SecretStr:
        return _private_key(value, "SIGNOFF_AUTH__PRIVATE_KEY")

    def kid(self) -> str:
        return keys.signing_kid(self.private_key.get_secret_value(), self.key_id)

    def prod_refusals(self) -> list[str]:
        # an issuer signs; which keys it would trust does not matter (it checks no token)
        if self.private_key.get_secret_value().strip() in keys.DEV_ONLY_KEYS:
            return ["SIGNOFF_AUTH__PRIVATE_KEY is the committed dev-only token key"]
        return []


class ContractSigningSettings(BaseModel):
    """``SIGNOFF_CONTRACTS__*`` of the proposals service: the one holder of the signing key."""

    #: Ed25519 private key (PEM or base64url) execution contracts are signed with
    signing_key: SecretStr = SecretStr(keys.DEV_ONLY_CONTRACT_PRIVATE_KEY)
    #: the ``kid`` a contract names; default: derived from the public key
    key_id: str | None = Field(default=None, min_length=1, max_length=64)
    #: how long after the claim an executor may still start a contract
    execute_within_s: int = Field(default=300, ge=1)

    @field_validator("signing_key")
    @classmethod
    def _key_parses(cls, value: SecretStr) -> SecretStr:
        return _private_key(value, "SIGNOFF_CONTRACTS__SIGNING_KEY")

    def kid(self) -> str:
        return keys.signing_kid(self.signing_key.get_secret_value(), self.key_id)

    def prod_refusals(self) -> list[str]:
        if self.signing_key.get_secret_value().strip() in keys.DEV_ONLY_KEYS:
            return ["SIGNOFF_CONTRACTS__SIGNING_KEY is the committed dev-only contract key"]
        return []


class ContractVerifyingSettings(BaseModel):
    """``SIGNOFF_CONTRACTS__*`` of executors: public keys only, so they cannot sign."""

    #: ``kid`` → Ed25519 public key of each contract signing key trusted; two during a rotation
    verify_keys: dict[str, str] = Field(default_factory=_dev_contract_keys, min_length=1)

    @field_validator("verify_keys")
    @classmethod
    def _keys_parse(cls, found: dict[str, str]) -> dict[str, str]:
        return _public_keys(found, "SIGNOFF_CONTRACTS__VERIFY_KEYS")

    def prod_refusals(self) -> list[str]:
        if set(self.verify_keys.values()) & keys.DEV_ONLY_KEYS:
            return ["SIGNOFF_CONTRACTS__VERIFY_KEYS trusts the committed dev-only contract key"]
        return []
