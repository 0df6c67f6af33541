"""The executor's settings: the shared groups plus ``SIGNOFF_EXECUTOR__*``."""

from __future__ import annotations

from pydantic import BaseModel, Field
from signoff_runtime.settings import ContractVerifyingSettings, ServiceSettings


class ExecutorGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=9103, ge=1, le=65535)
    #: unacknowledged contracts per process; each in-flight contract may hold a pool connection,
    #: so keep it at or below ``SIGNOFF_DB__POOL_SIZE``
    prefetch: int = Field(default=8, ge=1, le=256)
    #: how long a stop waits for in-flight contracts; keep it below the orchestrator's kill grace
    graceful_timeout_s: float = Field(default=20.0, gt=0)
    #: a bound on one provider call; past it the effect is uncertain (→ reconciliation)
    perform_timeout_s: float = Field(default=60.0, gt=0)


class ExecutorSettings(ServiceSettings):
    executor: ExecutorGroup = ExecutorGroup()
    #: the contract verifying keys (public: an executor cannot sign a contract)
    contracts: ContractVerifyingSettings = ContractVerifyingSettings()
