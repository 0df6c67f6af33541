"""The club domain's own settings, read from ``SIGNOFF_CLUB_*`` environment variables.

They belong to the domain, not to a service: whichever service runs a club operation (the
executor, the reconciler) reaches the card provider the same way and grants attempts the same
lease, so a lease the executor granted is the lease the reconciler waits out.

One variable has no ``SIGNOFF_CLUB_`` prefix: ``SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY``, the
services' negative-control switch for the card refund, refused outside ``SIGNOFF_ENV=test``.
"""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ClubSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_CLUB_", extra="ignore", frozen=True, populate_by_name=True
    )

    provider_url: str = Field(
        default="http://127.0.0.1:8010", description="Base URL of the card-payment provider."
    )
    provider_timeout_s: float = Field(
        default=5.0, gt=0, le=120, description="Client timeout of one provider call."
    )
    attempt_lease_s: int = Field(
        default=30,
        ge=1,
        le=3600,
        description="How long after an attempt is recorded its executor may still call the "
        "provider; the reconciler concludes 'never applied' only after this plus the timeout.",
    )
    env: str = Field(default="dev", validation_alias="SIGNOFF_ENV")
    unsafe_random_idempotency_key: bool = Field(
        default=False,
        validation_alias="SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY",
        description="Negative control (tests only): a fresh idempotency key per provider call "
        "instead of the attempt's, so the provider cannot recognise a repeated refund.",
    )

    @model_validator(mode="after")
    def _unsafe_only_in_tests(self) -> ClubSettings:
        if self.unsafe_random_idempotency_key and self.env != "test":
            raise ValueError("SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY needs SIGNOFF_ENV=test")
        return self
