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
from urllib.parse import unquote, urlsplit

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

from signoff_runtime.topology import ROLES, Role

DEV_TOKEN_SECRET = "dev-only-token-secret-do-not-deploy-0000000000"  # noqa: S105
DEV_CONTRACT_KEY = "dev-only-contract-key-do-not-deploy-000000000"


class RolePasswords(BaseModel):
    """``SIGNOFF_DB__PASSWORDS__<SERVICE>``: the password the migration step gives each service's
    database role (``signoff_runtime.roles``). Only the migration step reads these; a service
    reads its own in its ``SIGNOFF_DB__URL``. Unset: ``<service>-dev-password``, which the
    migration step refuses with ``SIGNOFF_ENV=prod``. One field per row of ``roles.ACCESS``."""

    agent: SecretStr | None = None
    proposals: SecretStr | None = None
    executor: SecretStr | None = None
    reconciler: SecretStr | None = None
    web: SecretStr | None = None


class DatabaseSettings(BaseModel):
    #: whom this process connects as: a service its own role (``<role_prefix>_<service>``), the
    #: migration step and operators' commands a role that owns the schemas
    url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/signoff"
    pool_size: int = Field(default=10, ge=1, le=200)
    statement_timeout_ms: int = Field(default=15_000, ge=100)
    #: service roles are named ``<role_prefix>_<service>`` (roles are cluster-wide: two
    #: deployments sharing a PostgreSQL server need two prefixes)
    role_prefix: str = Field(default="signoff", pattern=r"^[a-z][a-z0-9_]{0,30}$")
    passwords: RolePasswords = RolePasswords()


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
    #: each role's broker user name(s) (``{"agent": "signoff-agent", "web": ["web-1", "web-2"]}``):
    #: consumers accept a message only from the users of the roles allowed to send it; unset,
    #: every role is this process's own user (one shared connection: development, tests)
    users: dict[Role, list[str]] = Field(default_factory=dict)

    @field_validator("users", mode="before")
    @classmethod
    def _one_or_more(cls, value: object) -> object:
        if isinstance(value, dict):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value


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
    #: the executor runs a contract without checking its approver is still authorized
    skip_execution_authz: bool = False
    #: consumers skip the sender check: any broker user may send any message (user_id ignored)
    any_sender: bool = False

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
            _refuse_shared_broker_users(self.amqp)
        return self


def _refuse_shared_broker_users(amqp: AmqpSettings) -> None:
    """In ``prod`` every role has its own broker user, and none is ``guest``: with one shared
    user the sender check cannot tell the services apart."""
    missing = [role for role in ROLES if role != "cli" and not amqp.users.get(role)]
    if missing:
        raise ValueError(
            f"SIGNOFF_AMQP__USERS must name the broker user of every role in prod "
            f"(missing: {', '.join(missing)})"
        )
    named = [user for role in ROLES for user in amqp.users.get(role, [])]
    if len(named) != len(set(named)):
        raise ValueError("SIGNOFF_AMQP__USERS: each role needs its own broker user(s) in prod")
    if "guest" in named or broker_user(amqp.url) == "guest":
        raise ValueError("SIGNOFF_AMQP__USERS / SIGNOFF_AMQP__URL: 'guest' is refused in prod")


def broker_user(amqp_url: str) -> str:
    """The user an AMQP URL authenticates as (aio-pika's default ``guest`` if it names none)."""
    return unquote(urlsplit(amqp_url).username or "guest")


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
