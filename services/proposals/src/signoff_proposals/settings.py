"""The proposals service's settings: the shared groups plus ``SIGNOFF_PROPOSALS__*``."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator
from signoff_runtime.settings import ContractSigningSettings, ServiceSettings

from signoff_proposals.notifications.settings import NotifyGroup


class ProposalsGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8002, ge=0, le=65535)
    #: how often the sweeper looks for pending proposals past ``expires_at``, and how many at once
    expiry_interval_s: float = Field(default=2.0, gt=0)
    expiry_batch: int = Field(default=200, ge=1, le=10_000)
    #: an executing proposal with no outcome this long after its claim has its contract
    #: re-published; each further re-publish waits twice as long, up to ``stuck_backoff_max_s``
    stuck_after_s: float = Field(default=120.0, gt=0)
    stuck_backoff_max_s: float = Field(default=3600.0, gt=0)
    stuck_interval_s: float = Field(default=5.0, gt=0)
    stuck_batch: int = Field(default=100, ge=1, le=10_000)
    #: how often the state gauge counts every status, settled ones included (a whole-table
    #: ``GROUP BY``); the open statuses are counted every 5 s from their indexes
    state_totals_interval_s: float = Field(default=300.0, gt=0)
    #: quotas on what waits for people (see ``quotas``): pending proposals per conversation and
    #: per organization, and pending pause points per conversation (the organization limit
    #: applies to pause points as well, counted separately)
    max_pending_per_conversation: int = Field(default=5, ge=1)
    max_pending_per_organization: int = Field(default=500, ge=1)
    max_pending_pause_points_per_conversation: int = Field(default=5, ge=1)
    #: how long a pause point waits for its answer (from the database clock at storing)
    pause_point_ttl_s: float = Field(default=86_400.0, gt=0)
    #: roles that may see pause points but not resolve them
    look_only_roles: list[str] = Field(default_factory=lambda: ["viewer"])
    #: the event stream (``GET /v1/events``): a comment line this often keeps proxies from
    #: closing an idle stream; the person's membership is checked again this often
    stream_keepalive_s: float = Field(default=15.0, gt=0)
    stream_recheck_s: float = Field(default=30.0, gt=0)
    #: open streams per person and process (each open page of a frontend holds one)
    stream_max_per_person: int = Field(default=64, ge=1)
    #: the longest ``GET /v1/proposals/{id}?wait=S`` holds its answer (a larger ``S`` is capped)
    wait_max_s: float = Field(default=30.0, gt=0, le=300)
    #: a turn the agent starts on a pause point's resolution has no token: its requests may
    #: speak for that pause point's person this long after the resolution (``identity``)
    resume_window_s: float = Field(default=900.0, gt=0)
    #: the most approval commands decided in one transaction, each in its own savepoint
    #: (``signoff_runtime.savepoints``); 1, the default: each in its own transaction, up to the
    #: prefetch at once — measured faster here (docs/benchmarks.md, "approvals arriving at once")
    approval_batch_size: int = Field(default=1, ge=1, le=1000)
    #: ``module:callable`` returning ``(operations, directory)`` instead of the entry points.
    #: Tests only: refused unless ``SIGNOFF_ENV=test``.
    test_plugin: str | None = None


class ProposalsSettings(ServiceSettings):
    checks_tokens = True
    proposals: ProposalsGroup = ProposalsGroup()
    #: the contract signing key: this service alone holds it
    contracts: ContractSigningSettings = ContractSigningSettings()
    #: webhooks and e-mail notices (``SIGNOFF_NOTIFY__*``, ``notifications``)
    notify: NotifyGroup = NotifyGroup()

    @model_validator(mode="after")
    def _test_plugin_only_in_tests(self) -> ProposalsSettings:
        if self.proposals.test_plugin and self.env != "test":
            raise ValueError("SIGNOFF_PROPOSALS__TEST_PLUGIN needs SIGNOFF_ENV=test")
        return self
