"""signoff as separate processes against the private servers, each behind proxy links of its own.

Like ``make run``, every service is ``signoff serve NAME`` in its own process; unlike it, each
process reaches PostgreSQL and RabbitMQ through its own ``Link`` (``<label>.db``,
``<label>.amqp``), so a fault can cut, stall or drop the commits of one process only. Two
executors and two reconcilers run side by side. The stack is started once per session and reused
by every scenario; ``configure`` restarts the services only when a scenario asks for other
negative-control switches.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import httpx
from faults_proxy import Proxy
from faults_servers import PrivatePostgres, PrivateRabbit
from signoff_club.seed import seed_demo
from signoff_runtime.settings import AuthSettings, broker_user
from signoff_runtime.testing.processes import ServiceProcess, provider, service
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import QUEUES, Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

PREFIX = "faults"
LABELS = ("proposals", "agent", "executor", "executor-2", "reconciler", "reconciler-2")
TERMINAL = frozenset(
    {"succeeded", "revision_required", "failed", "declined", "expired", "superseded"}
)
#: the queues each service consumes (the reconciler also archives every dead-letter queue)
CONSUMERS = {
    "proposals": (
        "proposals.requests",
        "proposals.approvals",
        "proposals.pause-points",
        "proposals.outcomes",
        "proposals.reconciliation",
    ),
    "agent": ("agent.events",),
    "executor": ("executor.contracts",),
    "reconciler": ("reconciler.required",),
}


#: the services each negative-control switch changes (a control restarts only those)
SWITCH_SCOPE = {
    "SIGNOFF_UNSAFE__NO_DEDUP": ("executor",),
    "SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS": ("proposals",),
    "SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY": ("executor", "reconciler"),
    "SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX": ("proposals", "executor", "reconciler"),
    "SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM": ("proposals", "executor", "reconciler"),
}


def base_env(db_url: str, amqp_url: str) -> dict[str, str]:
    """Short leases and timeouts so a scenario settles in seconds; the stuck-execution sweep is
    set beyond every settle deadline, so each scenario proves the primary protections (outbox,
    confirms, redelivery, dedup, reconciliation) and not the backstop."""
    return {
        "SIGNOFF_ENV": "test",
        "SIGNOFF_DB__URL": db_url,
        "SIGNOFF_DB__POOL_SIZE": "8",
        "SIGNOFF_AMQP__URL": amqp_url,
        "SIGNOFF_AMQP__PREFIX": PREFIX,
        "SIGNOFF_AMQP__DELIVERY_LIMIT": "20",
        "SIGNOFF_AMQP__PUBLISH_TIMEOUT_S": "5",
        "SIGNOFF_LOG_LEVEL": "INFO",
        "SIGNOFF_LIMITS__APPROVALS_PER_MINUTE": "100000",
        "SIGNOFF_LIMITS__PROPOSALS_PER_MINUTE": "100000",
        "SIGNOFF_CLUB_PROVIDER_TIMEOUT_S": "2",
        "SIGNOFF_CLUB_ATTEMPT_LEASE_S": "3",
        "SIGNOFF_EXECUTOR__GRACEFUL_TIMEOUT_S": "10",
        "SIGNOFF_EXECUTOR__PERFORM_TIMEOUT_S": "10",
        "SIGNOFF_RECONCILER__POLL_S": "0.2",
        "SIGNOFF_RECONCILER__BASE_BACKOFF_S": "0.5",
        "SIGNOFF_RECONCILER__MAX_BACKOFF_S": "2",
        "SIGNOFF_RECONCILER__LEASE_S": "4",
        "SIGNOFF_RECONCILER__SCAN_INTERVAL_S": "1",
        "SIGNOFF_RECONCILER__STRANDED_AFTER_S": "1",
        "SIGNOFF_RECONCILER__GRACEFUL_TIMEOUT_S": "10",
        "SIGNOFF_PROPOSALS__EXPIRY_INTERVAL_S": "0.5",
        "SIGNOFF_PROPOSALS__STUCK_AFTER_S": "3600",
    }


@dataclass
class FaultStack:
    pg: PrivatePostgres
    rabbit: PrivateRabbit
    proxy: Proxy
    engine: AsyncEngine
    db_url: str
    log_dir: Path
    topology: Topology = field(default_factory=lambda: Topology(PREFIX, delivery_limit=20))
    switches: dict[str, str] = field(default_factory=dict)
    processes: dict[str, ServiceProcess] = field(default_factory=dict)
    http: httpx.AsyncClient = field(
        default_factory=lambda: httpx.AsyncClient(
            timeout=15.0, limits=httpx.Limits(max_connections=400, max_keepalive_connections=50)
        )
    )
    env: dict[str, str] = field(default_factory=dict)

    # -- processes -------------------------------------------------------------------------
    def start(self) -> None:
        self.env = base_env(self.db_url, self.rabbit.url)
        sim = provider({"SIGNOFF_CARD_PROVIDER_SEED": "7"}, self.log_dir).start()
        self.processes["provider"] = sim
        self.env["SIGNOFF_CLUB_PROVIDER_URL"] = sim.url
        for label in LABELS:
            self.proxy.link(f"{label}.db", self.pg.port)
            self.proxy.link(f"{label}.amqp", self.rabbit.port)
        self._start_all()
        sim.wait_healthy(60.0)

    def _process(self, label: str, port: int | None = None) -> ServiceProcess:
        db, amqp = self.proxy.links[f"{label}.db"], self.proxy.links[f"{label}.amqp"]
        env = {
            **self.env,
            **self._switches_of(label, self.switches),
            "SIGNOFF_DB__URL": self.db_url.replace(f":{self.pg.port}/", f":{db.port}/"),
            "SIGNOFF_AMQP__URL": f"amqp://guest:guest@127.0.0.1:{amqp.port}/",
        }
        proc = service(label.split("-")[0], env, self.log_dir, port)
        proc.name = label
        return proc

    @staticmethod
    def _switches_of(label: str, switches: Mapping[str, str]) -> dict[str, str]:
        service_name = label.split("-")[0]
        return {
            name: value
            for name, value in switches.items()
            if service_name in SWITCH_SCOPE.get(name, (service_name,))
        }

    def _start_all(self, labels: tuple[str, ...] = LABELS) -> None:
        """Start services at once (their imports dominate), then wait for each."""
        for label in labels:
            old = self.processes.get(label)
            self.processes[label] = self._process(label, old.port if old else None).start()
        with ThreadPoolExecutor(len(labels)) as pool:
            list(pool.map(lambda label: self.processes[label].wait_healthy(90.0), labels))

    def stop(self) -> None:
        with ThreadPoolExecutor(len(self.processes)) as pool:
            list(pool.map(lambda proc: proc.stop(timeout=20), self.processes.values()))

    def configure(self, switches: Mapping[str, str]) -> bool:
        """Run the services with these negative-control switches (none: every protection on),
        restarting only those whose switches change."""
        changed = tuple(
            label
            for label in LABELS
            if self._switches_of(label, switches) != self._switches_of(label, self.switches)
        )
        self.switches = dict(switches)
        if not changed:
            return False
        with ThreadPoolExecutor(len(changed)) as pool:
            list(pool.map(lambda label: self.processes[label].stop(timeout=20), changed))
        self._start_all(changed)
        return True

    def kill(self, label: str) -> None:
        self.processes[label].kill()

    def freeze(self, label: str, *, resume: bool = False) -> None:
        """``SIGSTOP`` a service (a stalled process: a long pause, a starved or suspended VM) —
        its connections stay open and nothing it holds is released — or ``SIGCONT`` it."""
        proc = self.processes[label].proc
        assert proc is not None and proc.poll() is None, f"{label} is not running"
        proc.send_signal(signal.SIGCONT if resume else signal.SIGSTOP)

    def terminate(self, label: str) -> None:
        self.processes[label].stop(signal.SIGTERM, timeout=30)

    def start_again(self, label: str) -> None:
        """Start a stopped service on its old port (and links) and wait until it is healthy."""
        fresh = self._process(label, self.processes[label].port).start()
        self.processes[label] = fresh
        fresh.wait_healthy(90.0)

    async def restart(self, label: str, *, kill: bool) -> None:
        """``kill -9`` (or SIGTERM) a service and start it again, off the event loop."""
        await asyncio.to_thread(self.kill if kill else self.terminate, label)
        await asyncio.to_thread(self.start_again, label)

    def url(self, label: str) -> str:
        return self.processes[label].url

    # -- state -----------------------------------------------------------------------------
    async def seed(self, organizations: int) -> list[dict[str, Any]]:
        orgs: list[dict[str, Any]] = []
        async with self.engine.begin() as conn:
            while len(orgs) < organizations:
                orgs += (await seed_demo(conn))["organizations"]
        return orgs[:organizations]

    @staticmethod
    def token(org: dict[str, Any]) -> str:
        return issue_token(AuthSettings(), org["users"]["manager"]["id"], org["id"])

    async def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            result = await conn.execute(text(sql), params)
            return [dict(row._mapping) for row in result]

    async def execute(self, sql: str, **params: Any) -> int:
        """Change the database directly (a fault, not a service's work); rows affected."""
        async with self.engine.begin() as conn:
            return (await conn.execute(text(sql), params)).rowcount

    async def ledger(self) -> dict[str, Any]:
        response = await self.http.get(f"{self.url('provider')}/v1/ledger")
        response.raise_for_status()
        return dict(response.json())

    async def provider_faults(self, config: dict[str, Any]) -> None:
        response = await self.http.post(f"{self.url('provider')}/_admin/faults", json=config)
        response.raise_for_status()

    async def provider_fault_history(self) -> list[dict[str, Any]]:
        response = await self.http.get(f"{self.url('provider')}/_admin/faults")
        response.raise_for_status()
        return list(response.json()["history"])

    async def publish(self, exchange: str, routing_key: str, body: bytes, message_id: str) -> None:
        connection = await aio_pika.connect(self.rabbit.url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            target = await channel.get_exchange(self.topology.name(exchange))
            await target.publish(
                aio_pika.Message(
                    body,
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    message_id=message_id,
                    content_type="application/json",
                    user_id=broker_user(self.rabbit.url),
                ),
                routing_key=routing_key,
            )

    async def consumers(self) -> dict[str, int]:
        """Consumers per work queue, by passive declares (the management plugin is off)."""
        counts: dict[str, int] = {}
        connection = await aio_pika.connect(self.rabbit.url)
        async with connection:
            for spec in QUEUES:
                channel = await connection.channel()
                declared = await channel.declare_queue(self.topology.name(spec.key), passive=True)
                counts[spec.key] = int(declared.declaration_result.consumer_count or 0)
        return counts

    def expected_consumers(self) -> dict[str, int]:
        """Each running service's subscriptions (two executors: two consumers, and so on)."""
        expected = {spec.key: 0 for spec in QUEUES}
        for label in LABELS:
            for queue in CONSUMERS[label.split("-")[0]]:
                expected[queue] += 1
        return expected
