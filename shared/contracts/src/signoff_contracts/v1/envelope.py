"""The envelope every message wears, modelled on CloudEvents.

``message_id`` is the consumer's dedup key; ``correlation_id`` is the proposal (or pause point)
the message is about, so one id threads a proposal's whole history through every service's
logs; ``causation_id`` names the message that caused this one.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from signoff_contracts.ids import new_id


def _now() -> datetime:
    return datetime.now(UTC)


def _message_id() -> str:
    return new_id("msg")


class Envelope(BaseModel):
    """Fields common to every message. Readers ignore fields they do not know (growth)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    message_id: str = Field(default_factory=_message_id, min_length=1, max_length=128)
    type: str
    version: int = 1
    source: str = Field(default="signoff", max_length=64, description="The sending service.")
    occurred_at: AwareDatetime = Field(default_factory=_now)
    correlation_id: str | None = Field(default=None, max_length=128)
    causation_id: str | None = Field(default=None, max_length=128)
