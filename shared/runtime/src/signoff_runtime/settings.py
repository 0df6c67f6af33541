"""Settings shared by every service, read from ``SIGNOFF_*`` environment variables.

Nested groups use ``__``: ``SIGNOFF_DB__URL``, ``SIGNOFF_AMQP__PREFIX``. Each service subclasses
``ServiceSettings`` and adds its own group. Outside development, placeholder secrets are refused
at start-up rather than discovered in production.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEV_TOKEN_SECRET = "dev-only-token-secret-do-not-deploy-0000000000"  # noqa: S105
DEV_CONTRACT_KEY = "dev-only-contract-key-do-not-deploy-000000000"


class DatabaseSettings(BaseModel):
    url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/signoff"
    pool_size: int = Field(default=10, ge=1, le=200)
    statement_timeout_ms: int = Field(default=15_000, ge=100)


class AmqpSettings(BaseModel):
    url: str = "amqp://guest:guest@127.0.0.1:5672/"
    prefix: str = Field(default="signoff", pattern=r"^[a-z][a-z0-9_-]{0,40}$")
    prefetch: int = Field(default=32, ge=1, le=1000)
    delivery_limit: int = Field(default=5, ge=1, le=100)
    request_timeout_s: float = Field(default=10.0, gt=0)
    publish_timeout_s: float = Field(default=10.0, gt=0)
    #: declare the whole topology at start-up; ``false`` where the broker's definitions
    #: (``deploy/rabbitmq/definitions.json``) hold it and each service's user may not
    declare_topology: bool = True


class AuthSettings(BaseModel):
    secret: SecretStr = SecretStr(DEV_TOKEN_SECRET)
    issuer: str = "signoff"
    audience: str = "signoff"
    token_ttl_s: int = Field(default=3600, ge=30)
    #: an external OpenID Connect issuer's key set; when set, only its tokens are accepted
    #: (signed with one of ``jwks_algorithms``, never HS256 — see docs/security.md)
    jwks_url: str | None = None
    jwks_algorithms: list[str] = Field(default_factory=lambda: ["RS256"], min_length=1)
    #: the claim naming the person's organization (an issuer may call it otherwise)
    org_claim: str = Field(default="org", min_length=1)


class ContractSettings(BaseModel):
    signing_key: SecretStr = SecretStr(DEV_CONTRACT_KEY)
    #: how long after the claim an executor may still start a contract
    execute_within_s: int = Field(default=300, ge=1)


class LimitsSettings(BaseModel):
    """``SIGNOFF_LIMITS__*``. Defaults are generous on purpose: benchmarks raise them further."""

    max_body_bytes: int = Field(default=256_000, ge=1024)
    approvals_per_minute: int = Field(default=6000, ge=1)
    messages_per_minute: int = Field(default=600, ge=1)


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_", env_nested_delimiter="__", extra="ignore", env_file=None
    )

    env: Literal["dev", "test", "prod"] = "dev"
    log_level: str = "INFO"
    log_json: bool = True
    db: DatabaseSettings = DatabaseSettings()
    amqp: AmqpSettings = AmqpSettings()
    auth: AuthSettings = AuthSettings()
    contracts: ContractSettings = ContractSettings()
    limits: LimitsSettings = LimitsSettings()

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> ServiceSettings:
        if self.env == "prod":
            if self.auth.secret.get_secret_value() == DEV_TOKEN_SECRET:
                raise ValueError("SIGNOFF_AUTH__SECRET must be set outside development")
            if self.contracts.signing_key.get_secret_value() == DEV_CONTRACT_KEY:
                raise ValueError("SIGNOFF_CONTRACTS__SIGNING_KEY must be set outside development")
        return self
