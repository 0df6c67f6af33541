"""The reconciler's settings: the shared groups plus ``SIGNOFF_RECONCILER__*``."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field
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
    #: a check still inconclusive this long after it opened is *escalated*: it stays open (the
    #: proposal stays ``needs_reconciliation``), operators are alerted
    #: (``signoff_reconciler_escalated_total``) and it is listed first by ``signoff proposals
    #: stuck``. Nothing turns "we don't know" into ``failed``: only an authoritative answer
    #: (the provider's, or an operator's ``signoff reconcile ID --resolve``) concludes it. The
    #: old name ``GIVE_UP_AFTER_S`` is still read, with the new meaning.
    escalate_after_s: float = Field(
        default=86_400.0,
        gt=0,
        validation_alias=AliasChoices("escalate_after_s", "give_up_after_s"),
    )
    #: once escalated, a check is asked about this often (the slower pace: the provider had a
    #: day to answer, and an operator is looking)
    escalated_check_every_s: float = Field(default=3_600.0, gt=0)
    #: how often each reconciler asks the operations for stranded attempts, and how long past
    #: an attempt's lease (and client timeout) it must be before it counts as stranded
    scan_interval_s: float = Field(default=30.0, gt=0)
    stranded_after_s: float = Field(default=60.0, ge=0)
    #: archive every ``<queue>.dlq`` into ``reconciler.dead_letters`` (``signoff dlq …``)
    archive_dead_letters: bool = True
    dead_letter_prefetch: int = Field(default=16, ge=1, le=256)
    #: how long ``signoff reconcile ID`` waits for the check it asked for
    check_now_wait_s: float = Field(default=30.0, gt=0)


class ReconcilerSettings(ServiceSettings):
    reconciler: ReconcilerGroup = ReconcilerGroup()
