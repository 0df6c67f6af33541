"""signoff as separate processes, started exactly as the end-to-end tests start it.

The environment is the end-to-end suite's (``tests/e2e/e2e_stack.py``), with what would
otherwise interfere with a benchmark raised or slowed: the pending-proposal quotas (thousands
wait at once here), and the expiry sweep's interval (the growth measurement times one sweep
itself). The suite's shortened timings (reconciler polling five times a second, short provider
timeouts) are dropped for the services' defaults. Nothing is tuned for speed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from signoff_runtime.testing.processes import ServiceProcess, provider, service

from signoff_bench.settings import REPO

sys.path.insert(0, str(REPO / "tests" / "e2e"))
from e2e_stack import SERVICES, stack_env

_UNLIMITED = str(10**9)
TEST_TIMINGS = {
    "SIGNOFF_CLUB_PROVIDER_TIMEOUT_S",
    "SIGNOFF_CLUB_ATTEMPT_LEASE_S",
    "SIGNOFF_RECONCILER__POLL_S",
    "SIGNOFF_RECONCILER__BASE_BACKOFF_S",
    "SIGNOFF_RECONCILER__MAX_BACKOFF_S",
    "SIGNOFF_PROPOSALS__EXPIRY_INTERVAL_S",
}
BENCH_ENV = {
    "SIGNOFF_PROPOSALS__MAX_PENDING_PER_ORGANIZATION": _UNLIMITED,
    "SIGNOFF_PROPOSALS__MAX_PENDING_PER_CONVERSATION": _UNLIMITED,
    "SIGNOFF_PROPOSALS__MAX_PENDING_PAUSE_POINTS_PER_CONVERSATION": _UNLIMITED,
    "SIGNOFF_PROPOSALS__EXPIRY_INTERVAL_S": "3600",
    # one demo manager proposes every case: the per-person rate would be the bottleneck
    "SIGNOFF_LIMITS__PROPOSALS_PER_MINUTE": _UNLIMITED,
}


@dataclass
class SignoffStack:
    database_url: str
    amqp_url: str
    prefix: str
    log_dir: Path
    processes: dict[str, ServiceProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env = stack_env(self.database_url, self.amqp_url, self.prefix)
        self.env = {k: v for k, v in env.items() if k not in TEST_TIMINGS} | BENCH_ENV

    def start(self) -> None:
        sim = provider(self.env, self.log_dir).start()
        self.processes["provider"] = sim
        self.env["SIGNOFF_CLUB_PROVIDER_URL"] = sim.url
        for name in SERVICES:
            self.processes[name] = service(name, self.env, self.log_dir).start()
        for proc in self.processes.values():
            proc.wait_healthy(90.0)

    def add_executor(self) -> str:
        """Another executor replica; returns its label (``executor-2``, ...)."""
        label = f"executor-{sum(1 for n in self.processes if n.startswith('executor')) + 1}"
        proc = service("executor", self.env, self.log_dir)
        proc.name = label
        self.processes[label] = proc.start()
        proc.wait_healthy(90.0)
        return label

    def stop(self) -> None:
        for proc in self.processes.values():
            proc.stop()

    def url(self, name: str) -> str:
        return self.processes[name].url

    def pids(self) -> dict[str, int]:
        return {
            name: proc.proc.pid for name, proc in self.processes.items() if proc.proc is not None
        }
