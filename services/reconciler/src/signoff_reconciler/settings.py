"""The reconciler's settings: the shared groups plus ``SIGNOFF_RECONCILER__*``."""

from __future__ import annotations

from pydantic import BaseModel, Field
from signoff_runtime.settings import ServiceSettings


class ReconcilerGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=9104, ge=1, le=65535)
    prefetch: int = Field(default=8, ge=1, le=256)
    graceful_timeout_s: float = Field(default=20.0, gt=0)
    #: due checks one reconciler leases at a time
    batch: int = Field(default=20, ge=1, le=1000)
    #: how often the loop looks for due checks when nothing wakes it
    poll_s: float = Field(default=1.0, gt=0)
    #: the first re-check waits this long, each next one twice as long, up to ``max_backoff_s``
    base_backoff_s: float = Field(default=2.0, gt=0)
    max_backoff_s: float = Field(default=300.0, gt=0)
    #: a leased check is due again after this long if its reconciler died mid-check
    lease_s: float = Field(default=120.0, gt=0)


class ReconcilerSettings(ServiceSettings):
    reconciler: ReconcilerGroup = ReconcilerGroup()
