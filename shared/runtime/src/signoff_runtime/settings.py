"""Settings shared by every service, read from ``SIGNOFF_*`` environment variables.

Nested groups use ``__``: ``SIGNOFF_DB__URL``, ``SIGNOFF_AMQP__PREFIX``. Each service subclasses
``ServiceSettings`` and adds its own group. Outside development, placeholder secrets are refused
at start-up rather than discovered in production; so is any negative-control switch
(``SIGNOFF_UNSAFE__*``) outside ``SIGNOFF_ENV=test``. ``load`` turns such a refusal into one clear
line on stderr and a non-zero exit instead of a traceback.
"""

from __future__ import annotations

import sys
from typing import Literal, TypeVar

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
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
    #: proposals each person may ask for per minute (per proposals-service process)
    proposals_per_minute: int = Field(default=600, ge=1)


class UnsafeSettings(BaseModel):
    """``SIGNOFF_UNSAFE__*``: negative controls. Each switch turns ONE protection off, so that the
    fault suite can prove its checker notices the violation that protection prevents. Every
    switch is refused outside ``SIGNOFF_ENV=test`` (see docs/reliability.md)."""

    #: the executor ignores its dedup row: a redelivered contract executes again
    no_dedup: bool = False
    #: the approval claim drops its status condition: racing approvals (or an approval racing a
    #: decline) can both win
    claim_without_status: bool = False
    #: the club's card refund sends a fresh idempotency key per provider call
    random_idempotency_key: bool = False
    #: messages of a state change are published directly after its commit (best effort) instead
    #: of written to the outbox in its transaction
    publish_without_outbox: bool = False
    #: the outbox relay commits rows as sent before the broker confirms their publish
    mark_sent_before_confirm: bool = False
    #: the proposals service stores a v1 ``ProposalRequested`` as sent: the agent's arguments,
    #: preview, organization and person, unchecked (the contract made outside the trust boundary)
    trust_agent_contract: bool = False

    def enabled(self) -> list[str]:
        """The environment variables of the switches that are on."""
        return [f"SIGNOFF_UNSAFE__{name.upper()}" for name, on in self if on]


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
    unsafe: UnsafeSettings = UnsafeSettings()

    @field_validator("unsafe")
    @classmethod
    def _unsafe_only_in_tests(cls, unsafe: UnsafeSettings, info: ValidationInfo) -> UnsafeSettings:
        # ``env`` is absent from ``info.data`` when it failed itself: refused then too
        env = info.data.get("env")
        if unsafe.enabled() and env != "test":
            raise ValueError(
                f"{', '.join(unsafe.enabled())}: negative-control switches turn a protection off "
                f"and are refused unless SIGNOFF_ENV=test (it is {env or 'not valid'!r})"
            )
        return unsafe

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> ServiceSettings:
        if self.env == "prod":
            if self.auth.secret.get_secret_value() == DEV_TOKEN_SECRET:
                raise ValueError("SIGNOFF_AUTH__SECRET must be set outside development")
            if self.contracts.signing_key.get_secret_value() == DEV_CONTRACT_KEY:
                raise ValueError("SIGNOFF_CONTRACTS__SIGNING_KEY must be set outside development")
        return self


S = TypeVar("S", bound=BaseSettings)


def load(settings_class: type[S], service: str) -> S:
    """Read a service's settings, or end the process with one line per refusal (exit code 2).

    A refused setting is an operator's mistake, not a crash: it deserves a sentence naming the
    variable, not a traceback.
    """
    try:
        return settings_class()
    except ValidationError as exc:
        for line in refusals(exc):
            sys.stderr.write(f"signoff {service}: refusing to start: {line}\n")
        raise SystemExit(2) from None


def refusals(exc: ValidationError) -> list[str]:
    """Each error as the environment variable it concerns and what is wrong with it."""
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        location = "__".join(str(part) for part in error["loc"]).upper()
        if error["type"] == "value_error":
            lines.append(message)
        else:
            lines.append(f"SIGNOFF_{location}: {message}" if location else message)
    return lines
