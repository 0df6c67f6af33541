"""signoff as separate processes, started exactly as the end-to-end tests start it.

The environment is the one every test stack shares (``signoff_runtime.testing.processes``:
``stack_env``) without the tests' shortened timings — each service keeps its defaults — and with
what would otherwise interfere with a benchmark raised or slowed: the pending-proposal quotas
(thousands wait at once here), e-mail notices (off: see ``BENCH_ENV``), and the expiry sweep's
interval — nothing lapses while batches are measured; the growth measurement restarts the
proposals service with ``GROWTH_ENV``, so that its own sweep takes each lapsed batch at once, and
reads how long that took from its ``/metrics``.
The expiry batch is set here because that measurement lapses exactly one batch at a time.
Nothing is tuned for speed. The card provider answers every refund after
``provider_delay_ms`` (its own ``delay`` fault at probability 1): the executor scaling batches
propose card refunds, I/O-bound work as a real provider's is; no other batch calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from signoff_runtime.testing.processes import (
    SERVICES,
    ServiceProcess,
    provider,
    service,
    stack_env,
)

_UNLIMITED = str(10**9)
#: the expiry sweep's batch (the growth measurement lapses one full batch per sweep)
EXPIRY_BATCH = 200
BENCH_ENV = {
    "SIGNOFF_PROPOSALS__MAX_PENDING_PER_ORGANIZATION": _UNLIMITED,
    "SIGNOFF_PROPOSALS__MAX_PENDING_PER_CONVERSATION": _UNLIMITED,
    "SIGNOFF_PROPOSALS__MAX_PENDING_PAUSE_POINTS_PER_CONVERSATION": _UNLIMITED,
    "SIGNOFF_PROPOSALS__EXPIRY_BATCH": str(EXPIRY_BATCH),
    "SIGNOFF_PROPOSALS__EXPIRY_INTERVAL_S": "3600",
    # one demo manager proposes every case: the per-person rate would be the bottleneck
    "SIGNOFF_LIMITS__PROPOSALS_PER_MINUTE": _UNLIMITED,
    # no e-mail notices: the raw programs and LangGraph send none, and with no mail server here
    # each notice was retried with back-off all through a run (proposals-service CPU in every
    # figure); webhooks stay on (none is subscribed)
    "SIGNOFF_NOTIFY__EMAIL_ENABLED": "false",
}
#: under ``BENCH_SMOKE`` no side's pool holds more connections than this (``rig``): a handful of
#: proposals at a concurrency of 4 need no more, and the smoke test shares PostgreSQL's stock 100
#: connections with the rest of ``make test``
SMOKE_POOL = 4
#: signoff's processes' part of it (the executor's pool is its window plus three)
SMOKE_ENV = {
    "SIGNOFF_DB__POOL_SIZE": str(SMOKE_POOL),
    "SIGNOFF_EXECUTOR__CONCURRENCY": str(SMOKE_POOL),
}

GROWTH_ENV = {"SIGNOFF_PROPOSALS__EXPIRY_INTERVAL_S": "0.2"}


@dataclass
class SignoffStack:
    database_url: str
    amqp_url: str
    prefix: str
    log_dir: Path
    provider_delay_ms: int = 100
    processes: dict[str, ServiceProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env = stack_env(self.database_url, self.amqp_url, self.prefix, quick=False) | BENCH_ENV
        if self.provider_delay_ms:
            delay = f"delay=1,delay_ms={self.provider_delay_ms}"
            self.env["SIGNOFF_CARD_PROVIDER_FAULTS"] = delay

    def start(self) -> None:
        sim = provider(self.env, self.log_dir).start()
        self.processes["provider"] = sim
        self.env["SIGNOFF_CLUB_PROVIDER_URL"] = sim.url
        for name in SERVICES:
            self.processes[name] = service(name, self.env, self.log_dir).start()
        for proc in self.processes.values():
            proc.wait_healthy(90.0)

    def add_executor(self, env: dict[str, str] | None = None) -> str:
        """Another executor replica, ``env`` added to its environment; returns its label
        (``executor-2``, ...)."""
        label = f"executor-{sum(1 for n in self.processes if n.startswith('executor')) + 1}"
        proc = service("executor", self.env | (env or {}), self.log_dir)
        proc.name = label
        self.processes[label] = proc.start()
        proc.wait_healthy(90.0)
        return label

    def remove_executors(self) -> None:
        """Back to the one executor the stack started with."""
        for label in [n for n in self.processes if n.startswith("executor-")]:
            self.processes.pop(label).stop()

    def executors(self) -> int:
        return sum(1 for n in self.processes if n.startswith("executor"))

    def restart(self, name: str, env: dict[str, str]) -> None:
        """Stop process ``name`` and start it again on its port with ``env`` added."""
        old = self.processes[name]
        old.stop()
        proc = service(name, self.env | env, self.log_dir, port=old.port)
        self.processes[name] = proc.start()
        proc.wait_healthy(90.0)

    def stop(self) -> None:
        for proc in self.processes.values():
            proc.stop()

    def url(self, name: str) -> str:
        return self.processes[name].url

    def pids(self) -> dict[str, int]:
        return {
            name: proc.proc.pid for name, proc in self.processes.items() if proc.proc is not None
        }
