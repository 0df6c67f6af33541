"""Settings shared by every service, read from ``SIGNOFF_*`` environment variables.

Nested groups use ``__``: ``SIGNOFF_DB__URL``, ``SIGNOFF_AMQP__PREFIX``. Each service subclasses
``ServiceSettings`` and adds its own groups (the key groups of ``key_settings`` only where it
needs them). With ``SIGNOFF_ENV=prod``, every group that holds a secret or key refuses a
placeholder, a value too short, or one committed in this repository (``secret_policy``), at start-up
rather than in production; any negative-control switch (``SIGNOFF_UNSAFE__*``) is refused
outside ``SIGNOFF_ENV=test``. ``load`` turns such a refusal into one clear
line on stderr and a non-zero exit instead of a traceback.

Every shared group is here, with its description (over 300 lines): ``signoff settings`` and the
generated configuration reference read them from this one module.
"""

from __future__ import annotations

import re
import sys
from typing import ClassVar, Literal, Protocol, TypeVar, runtime_checkable
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

from signoff_runtime import secret_policy
from signoff_runtime.key_settings import (
    AuthSettings,
    ContractSigningSettings,
    ContractVerifyingSettings,
    IssuerSettings,
)
from signoff_runtime.retention import RetentionSettings
from signoff_runtime.topology import ROLES, Role
from signoff_runtime.validation import field_errors

__all__ = [
    "AmqpSettings",
    "AuthSettings",
    "ContractSigningSettings",
    "ContractVerifyingSettings",
    "DatabaseSettings",
    "IssuerSettings",
    "LimitsSettings",
    "MetricsSettings",
    "ServiceSettings",
    "UnsafeSettings",
    "load",
    "refusals",
]


@runtime_checkable
class ProdChecked(Protocol):
    """A settings group that knows which of its values production refuses."""

    def prod_refusals(self) -> list[str]: ...


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

    def prod_refusals(self) -> list[str]:
        # the default (a local server, no password) is no committed secret; a URL set is checked
        if "url" not in self.model_fields_set:
            return []
        return secret_policy.url_refusals("SIGNOFF_DB__URL", self.url)


class AmqpSettings(BaseModel):
    #: one node, or several nodes of one cluster, comma-separated, tried in turn on connect and
    #: on every reconnect (``signoff_runtime.failover``); all with the same user and vhost
    url: str = "amqp://guest:guest@127.0.0.1:5672/"
    prefix: str = Field(default="signoff", pattern=r"^[a-z][a-z0-9_-]{0,40}$")
    prefetch: int = Field(default=32, ge=1, le=1000)
    #: the most deliveries a batching consumer (``signoff_runtime.batching``: the proposals
    #: service's outcomes, the agent's events) handles in one transaction; 1: each in its own
    batch_size: int = Field(default=32, ge=1, le=1000)
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

    @field_validator("url")
    @classmethod
    def _one_user_and_vhost(cls, url: str) -> str:
        # the sender check trusts the user this process connects as: one, whichever node
        if len({(broker_user(u), urlsplit(u).path or "/") for u in amqp_urls(url)}) > 1:
            raise ValueError("every address in SIGNOFF_AMQP__URL needs the same user and vhost")
        return url

    @field_validator("users", mode="before")
    @classmethod
    def _one_or_more(cls, value: object) -> object:
        if isinstance(value, dict):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value

    def prod_refusals(self) -> list[str]:
        # the default's ``guest`` only reaches a broker on this host (RabbitMQ refuses it from
        # elsewhere): commands that never use the broker need not set one; a URL set is checked
        found = _shared_broker_users(self)
        if "url" not in self.model_fields_set:
            return found
        return found + [
            line
            for url in amqp_urls(self.url)
            for line in secret_policy.url_refusals("SIGNOFF_AMQP__URL", url)
        ]


class LimitsSettings(BaseModel):
    """``SIGNOFF_LIMITS__*``. Defaults are generous on purpose: benchmarks raise them further."""

    max_body_bytes: int = Field(default=256_000, ge=1024)
    approvals_per_minute: int = Field(default=6000, ge=1)
    messages_per_minute: int = Field(default=600, ge=1)
    #: proposals each person may ask for per minute (per proposals-service process)
    proposals_per_minute: int = Field(default=600, ge=1)


class MetricsSettings(BaseModel):
    """``SIGNOFF_METRICS__*``: where ``/metrics`` is served. Unset port: on the service's own
    port beside its routes (development, tests). Set (the deployments do: web 9100, agent 9101,
    proposals 9102): on that port only, so the public API never serves it and a NetworkPolicy
    admits only Prometheus there (docs/operations.md)."""

    port: int | None = Field(default=None, ge=1, le=65535)
    host: str = "127.0.0.1"


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
    #: token checks ignore the audience: an agent-audience token approves a proposal
    accept_any_audience: bool = False
    #: the web trusts a signed session cookie without its server-side row: sign-out (or an
    #: operator's revocation) no longer ends a copied session
    no_session_revocation: bool = False
    #: the web's sign-in takes any number of attempts per address and per account
    no_signin_rate_limit: bool = False
    #: the proposals event stream (``GET /v1/events``) hands every organization's changes to
    #: every reader instead of only their own organization's
    events_every_organization: bool = False
    #: the proposals service stores a v1 ``ProposalRequested`` as sent: the agent's arguments,
    #: preview, organization and person, unchecked (the contract made outside the trust boundary)
    trust_agent_contract: bool = False
    #: a withdrawal skips the proposer-or-manager check: any member withdraws any pending proposal
    withdraw_anyones: bool = False
    #: anyone of the organization may answer any pause point: the owner-only rule is off
    anyone_answers_pause_points: bool = False
    #: the approval policy's quorum is not checked: the first approval claims a proposal that
    #: needs two (or more) distinct approvers
    skip_quorum: bool = False

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
    metrics: MetricsSettings = MetricsSettings()
    unsafe: UnsafeSettings = UnsafeSettings()
    retention: RetentionSettings = RetentionSettings()

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


def _shared_broker_users(amqp: AmqpSettings) -> list[str]:
    """In ``prod`` every role has its own broker user, and none is ``guest``: with one shared
    user the sender check cannot tell the services apart."""
    missing = [role for role in ROLES if role != "cli" and not amqp.users.get(role)]
    if missing:
        return [
            f"SIGNOFF_AMQP__USERS must name the broker user of every role in prod "
            f"(missing: {', '.join(missing)})"
        ]
    named = [user for role in ROLES for user in amqp.users.get(role, [])]
    if len(named) != len(set(named)):
        return ["SIGNOFF_AMQP__USERS: each role needs its own broker user(s) in prod"]
    if "guest" in named or broker_user(amqp.url) == "guest":
        return ["SIGNOFF_AMQP__USERS / SIGNOFF_AMQP__URL: 'guest' is refused in prod"]
    return []


def broker_user(amqp_url: str) -> str:
    """The user an AMQP URL authenticates as (aio-pika's default ``guest`` if it names none);
    of a list of nodes, the first's (``AmqpSettings`` makes them all the same)."""
    return unquote(urlsplit(amqp_urls(amqp_url)[0]).username or "guest")


#: a comma before the next URL's scheme (a comma may appear inside a password)
_NEXT_URL = re.compile(r"\s*,\s*(?=amqps?://)")
_AUTHORITY = re.compile(r"^(?P<scheme>amqps?://)(?P<authority>[^/?#]*)(?P<rest>.*)$", re.S)


def amqp_urls(url: str) -> list[str]:
    """The nodes ``SIGNOFF_AMQP__URL`` names, in the order to try them: a comma list of URLs
    (``amqp://u:p@a:5672/,amqp://u:p@b:5672/``), or one URL with several hosts as libpq has
    them (``amqp://u:p@a:5672,b:5672/``), or one node."""
    urls = []
    for part in _NEXT_URL.split(url.strip()):
        if not (found := _AUTHORITY.match(part)):
            urls.append(part)
            continue
        userinfo, at, hosts = found["authority"].rpartition("@")
        urls += [
            f"{found['scheme']}{userinfo}{at}{host.strip()}{found['rest']}"
            for host in hosts.split(",")
            if host.strip()
        ]
    return [u for u in urls if u] or [url]


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
    for error in field_errors(exc, limit=100):
        message = error.message.removeprefix("Value error, ")
        location = "__".join(error.loc).upper()
        if error.type == "value_error":
            lines.append(message)
        else:
            lines.append(f"SIGNOFF_{location}: {message}" if location else message)
    return lines
