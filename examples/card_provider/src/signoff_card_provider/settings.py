"""Settings of the card-provider simulator, read once from ``SIGNOFF_CARD_PROVIDER_*``.

The simulator is a test double, so its admin routes (clock, faults, reset) and the
per-request ``X-Fault`` header are on by default; ``allow_admin=false`` turns them all off
for a run that should behave like a plain provider.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from signoff_card_provider.faults import FaultConfig, parse_fault_spec


class Settings(BaseSettings):
    """Where to listen, how long idempotency keys live, and which faults to inject."""

    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_CARD_PROVIDER_", env_ignore_empty=True, frozen=True
    )

    host: str = Field(default="127.0.0.1", description="Interface to bind.")
    port: int = Field(default=8010, ge=0, le=65535, description="TCP port to bind.")
    retention_seconds: int = Field(
        default=86400,
        ge=1,
        description="How long an idempotency key is remembered (Stripe: at least 24 hours).",
    )
    faults: str = Field(
        default="",
        description="Fault spec applied at start, e.g. 'drop_response=0.2,delay=0.1,seed=7' "
        "(format in signoff_card_provider.faults).",
    )
    seed: int | None = Field(
        default=None,
        description="Seeds refund ids, and the fault dice when the fault spec names no seed.",
    )
    allow_admin: bool = Field(
        default=True, description="Serve /_admin/* routes and honour the X-Fault header."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log level of the service."
    )

    @field_validator("faults")
    @classmethod
    def _faults_parse(cls, value: str) -> str:
        """Fail at start-up, with the parser's message, rather than at the first request."""
        parse_fault_spec(value)
        return value

    def fault_config(self) -> FaultConfig:
        """The start-up fault plan; the spec's seed wins over ``seed``."""
        config = parse_fault_spec(self.faults)
        if config.seed is None and self.seed is not None:
            return config.model_copy(update={"seed": self.seed})
        return config
