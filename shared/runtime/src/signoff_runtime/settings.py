"""Settings shared by every service, read from ``SIGNOFF_*`` environment variables.

Nested groups use ``__``: ``SIGNOFF_DB__URL``, ``SIGNOFF_AMQP__PREFIX``. Each service subclasses
``ServiceSettings`` and adds its own groups (the key groups of ``key_settings`` only where it
needs them). With ``SIGNOFF_ENV=prod``, every group that holds a secret or key refuses a
placeholder, a value too short, or one committed in this repository (``secret_policy``), at start-up
rather than in production; any negative-control switch (``SIGNOFF_UNSAFE__*``) is refused
outside ``SIGNOFF_ENV=test``. ``load`` turns such a refusal into one clear
line on stderr and a non-zero exit instead of a traceback.
"""

from __future__ import annotations

import sys
from typing import ClassVar, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from signoff_runtime import secret_policy
from signoff_runtime.key_settings import (
    AuthSettings,
    ContractSigningSettings,
    ContractVerifyingSettings,
    IssuerSettings,
)

__all__ = [
    "AmqpSettings",
    "AuthSettings",
    "ContractSigningSettings",
    "ContractVerifyingSettings",
    "DatabaseSettings",
    "IssuerSettings",
    "LimitsSettings",
    "ServiceSettings",
    "UnsafeSettings",
    "load",
    "refusals",
]


@runtime_checkable
class ProdChecked(Protocol):
    """A settings group that knows which of its values production refuses."""

    def prod_refusals(self) -> list[str]: ...


class DatabaseSettings(BaseModel):
    url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/signoff"
    pool_size: int = Field(default=10, ge=1, le=200)
    statement_timeout_ms: int = Field(default=15_000, ge=100)

    def prod_refusals(self) -> list[str]:
        # the default (a local server, no password) is no committed secret; a URL set is checked
        if "url" not in self.model_fields_set:
            return []
        return secret_policy.url_refusals("SIGNOFF_DB__URL", self.url)


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

    def prod_refusals(self) -> list[str]:
        # the default's ``guest`` only reaches a broker on this host (RabbitMQ refuses it from
        # elsewhere): commands that never use the broker need not set one; a URL set is checked
        if "url" not in self.model_fields_set:
            return []
        return secret_policy.url_refusals("SIGNOFF_AMQP__URL", self.url)


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
    #: token checks ignore the audience: an agent-audience token approves a proposal
    accept_any_audience: bool = False

    def enabled(self) -> list[str]:
        """The environment variables of the switches that are on."""
        return [f"SIGNOFF_UNSAFE__{name.upper()}" for name, on in self if on]


class ServiceSettings(BaseSettings):
    """What every service reads. ``SIGNOFF_ENV`` defaults to ``dev`` here (libraries, tests and
    the operator's CLI commands); ``signoff serve`` itself refuses to start without it."""

    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_", env_nested_delimiter="__", extra="ignore", env_file=None
    )

    #: set by the services that check bearer tokens (agent, proposals): production refuses
    #: their trusting the committed dev-only token key. The others never check a token, so
    #: they need no ``SIGNOFF_AUTH__*`` at all.
    checks_tokens: ClassVar[bool] = False

    env: Literal["dev", "test", "prod"] = "dev"
    log_level: str = "INFO"
    log_json: bool = True
    db: DatabaseSettings = DatabaseSettings()
    amqp: AmqpSettings = AmqpSettings()
    auth: AuthSettings = AuthSettings()
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
    def _refuse_unsafe_production(self) -> ServiceSettings:
        # the switch travels with the auth group, the only place tokens are checked from
        self.auth._accept_any_audience = self.unsafe.accept_any_audience
        if self.env == "prod":
            # an issuer's auth group checks its private key; a verifier's, the keys it trusts
            skip = (
                set() if self.checks_tokens or isinstance(self.auth, IssuerSettings) else {"auth"}
            )
            found = [
                line
                for name in type(self).model_fields
                if name not in skip and isinstance(group := getattr(self, name), ProdChecked)
                for line in group.prod_refusals()
            ]
            if found:
                raise ValueError("; ".join(found))
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
