"""The executor's settings: the shared groups plus ``SIGNOFF_EXECUTOR__*``.

**One setting sizes the window**: ``SIGNOFF_EXECUTOR__CONCURRENCY``, the contracts one process
works on at once. The rest follows from it:

- the contract subscriber's prefetch *is* that number. FastStream runs every RabbitMQ delivery as
  a task of its own as it arrives (its RabbitMQ subscribers have no worker pool, unlike its
  Kafka, NATS or Redis ones), so the broker's window of unacknowledged deliveries is the
  process's concurrency; each contract is acknowledged only after its transaction committed
  (``signoff_runtime.consumer.settle``), so it holds its place in the window until then;
- the database pool is that number plus ``RESERVED_CONNECTIONS``: every contract in flight
  holds at most one connection at a time (each of its transactions closes its connection
  before the next opens, an in-doubt commit's probe included), and the outbox relay, the
  retention pruning and the readiness probe take one each. ``SIGNOFF_DB__POOL_SIZE`` (which the
  deployments set once for every service) is raised to that if it is set lower — a smaller
  pool would make the pool, not the setting, the window — and kept if it is larger.

The default (32) keeps the machine as the limit rather than the window: one process runs at
most one core (one event loop), about 5 ms of CPU per contract, so near 200 contracts/s; a
contract takes ~10 database round trips, 50 to 150 ms under load, so 200/s needs 10 to 30 in
flight (Little's law). The old window of 8 held a process near 80 contracts/s with its core
a quarter busy. Each process costs the database ``CONCURRENCY + 3`` connections (docs/scaling.md:
the connection budget).
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field, model_validator
from signoff_runtime.settings import ContractVerifyingSettings, ServiceSettings

#: database connections beside the contracts' own: the outbox relay's drain, the retention
#: pruning and the readiness probe (``/readyz``)
RESERVED_CONNECTIONS = 3


class ExecutorGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=9103, ge=1, le=65535)
    #: contracts this process works on at once — the contract subscriber's prefetch, and
    #: (plus ``RESERVED_CONNECTIONS``) its database pool; see the module docstring.
    #: ``SIGNOFF_EXECUTOR__PREFETCH``, its earlier name, is read as the same setting.
    concurrency: int = Field(
        default=32, ge=1, le=256, validation_alias=AliasChoices("concurrency", "prefetch")
    )
    #: how long a stop waits for in-flight contracts; keep it below the orchestrator's kill grace
    graceful_timeout_s: float = Field(default=20.0, gt=0)
    #: a bound on one provider call; past it the effect is uncertain (→ reconciliation)
    perform_timeout_s: float = Field(default=60.0, gt=0)


class ExecutorSettings(ServiceSettings):
    executor: ExecutorGroup = ExecutorGroup()
    #: the contract verifying keys (public: an executor cannot sign a contract)
    contracts: ContractVerifyingSettings = ContractVerifyingSettings()

    @model_validator(mode="after")
    def _pool_fits_the_window(self) -> ExecutorSettings:
        needed = pool_needed(self.executor.concurrency)
        if self.db.pool_size < needed:
            self.db = self.db.model_copy(update={"pool_size": needed})
        return self


def pool_needed(concurrency: int) -> int:
    """The database pool ``concurrency`` contracts in flight need (module docstring)."""
    return concurrency + RESERVED_CONNECTIONS
