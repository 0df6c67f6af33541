"""A private three-node RabbitMQ cluster, signoff on it, and the scenario that kills queue leaders.

Users who outgrow one machine run RabbitMQ as a cluster of (at least) three nodes, every
signoff queue a quorum queue replicated on each. The cluster here is three ``PrivateRabbit``
nodes on this machine (their own node names, ports, data and log directories; the Erlang cookie
of the user they run as), joined with ``rabbitmqctl join_cluster``. The services reach it through
``SIGNOFF_AMQP__URL`` naming all three nodes, each service in its own order, so some hold their
connections on the node that dies (they must fail over) and some elsewhere (their consumers must
survive the queue's new leader).

The scenario kills (``kill -9``) the node leading the contracts queue, then — once it is back —
the one leading the outcomes queue, each while approvals and proposals stream. RabbitMQ elects
new leaders among the surviving replicas; nothing may be lost or done twice, and afterwards every
queue has its consumers and all three replicas again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from faults_history import Case
from faults_scenarios import Run, Scenario, consumers_back
from faults_servers import PrivateRabbit, ServerFailed, _amqp_ready
from faults_stack import LABELS, FaultStack
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import ServiceProcess
from signoff_runtime.topology import QUEUES

#: ``{"connection_name","executor-2"}`` in ``list_connections client_properties``' output
_CONNECTION_NAME = re.compile(r"connection_name\W+(?:longstr\W+)?([\w.-]+)")


class PrivateCluster:
    """Three nodes, one cluster: ``start``, ``leader`` of a queue, ``kill`` and ``revive`` a
    node, ``stop``."""

    def __init__(self, size: int = 3) -> None:
        tag = secrets.token_hex(3)
        self.nodes = [PrivateRabbit() for _ in range(size)]
        for number, node in enumerate(self.nodes, start=1):
            node.node = f"signoff-cluster-{tag}-{number}@localhost"

    @property
    def url(self) -> str:
        """Every node's address, comma-separated (``SIGNOFF_AMQP__URL``)."""
        return ",".join(node.url for node in self.nodes)

    def url_from(self, first: int, name: str, *, failover: bool = True) -> str:
        """The addresses starting with node ``first`` (spreads the services' connections), each
        naming its connections ``name``; only that node's without ``failover``."""
        order = (self.nodes[first:] + self.nodes[:first])[: None if failover else 1]
        return ",".join(f"{node.url}?name={name}" for node in order)

    def start(self) -> PrivateCluster:
        """Boot the nodes side by side, then join the others to the first (~20 s here)."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for future in [pool.submit(node.start) for node in self.nodes]:
                future.result()
        seed = self.nodes[0]
        for node in self.nodes[1:]:
            node.ctl("stop_app")
            node.ctl("join_cluster", seed.node)
            node.ctl("start_app")
        return self

    def _live(self) -> PrivateRabbit:
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None and _amqp_ready(node.port):
                return node
        raise ServerFailed("no cluster node is running")

    def leader(self, queue: str) -> PrivateRabbit:
        """The node whose replica of quorum queue ``queue`` leads it now."""
        rows = self._live().ctl("list_queues", "-q", "--no-table-headers", "name", "leader")
        for line in rows.splitlines():
            name, _, leader = line.partition("\t")
            if name == queue:
                return next(node for node in self.nodes if node.node == leader.strip())
        raise ServerFailed(f"no queue {queue} in the cluster:\n{rows}")

    def members_offline(self) -> dict[str, int]:
        """Replicas not online, per quorum queue (0 everywhere once every node is back)."""
        rows = self._live().ctl(
            "list_queues", "-q", "--no-table-headers", "name", "members", "online"
        )
        missing = {}
        for line in rows.splitlines():
            name, members, online = line.split("\t")
            if (gap := members.count("@") - online.count("@")) > 0:
                missing[name] = gap
        return missing

    def connections(self) -> Counter[str]:
        """Open client connections per connection name, on the nodes that are up."""
        rows = self._live().ctl("list_connections", "-q", "--no-table-headers", "client_properties")
        return Counter(_CONNECTION_NAME.findall(rows))

    def kill(self, node: PrivateRabbit) -> None:
        node.kill()

    def revive(self, node: PrivateRabbit, timeout: float = 60.0) -> None:
        """Start a killed node again on its own data: it rejoins the cluster by itself."""
        node.start(timeout)
        deadline = time.monotonic() + timeout
        while node.node not in self.running_nodes():
            if time.monotonic() > deadline:
                raise ServerFailed(f"{node.node} did not rejoin within {timeout}s")
            time.sleep(0.5)

    def running_nodes(self) -> list[str]:
        status = json.loads(self._live().ctl("cluster_status", "--formatter", "json"))
        return list(status["running_nodes"])

    def stop(self) -> None:
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda node: node.stop(), self.nodes))


@dataclass
class ClusterStack(FaultStack):
    """The fault stack with every service on the cluster: the database still behind proxy links,
    the broker reached directly through the address list (``rabbit`` is the first node, which
    the suite's own checks use once every node is back)."""

    cluster: PrivateCluster = field(kw_only=True)

    def _process(self, label: str, port: int | None = None) -> ServiceProcess:
        proc = super()._process(label, port)
        first = LABELS.index(label) % len(self.cluster.nodes)
        failover = self.switches.get("ADDRESS_LIST") != "off"
        proc.env["SIGNOFF_AMQP__URL"] = self.cluster.url_from(first, label, failover=failover)
        return proc


#: the negative control: every service on its first node only (``configure`` restarts them)
NO_ADDRESS_LIST = {"ADDRESS_LIST": "off"}


# -- the scenario -------------------------------------------------------------------------------
#: the queues whose leaders die: contracts (proposals → executors), outcomes (executors → proposals)
LEADERS_KILLED = ("executor.contracts", "proposals.outcomes")


async def leader_kills(run: Run) -> None:
    """For each queue in turn, under its own half of the stream (proposals and approvals): find
    the node leading it, start the half, ``kill -9`` the node once a third of the half is claimed
    (contracts and outcomes in flight; the provider holds some refunds, so some executors hold
    unacknowledged contracts), leave it dead a moment, then start it again and wait until it is
    back in the cluster (two nodes down at once would be a quorum lost, not a node)."""
    stack = run.stack
    assert isinstance(stack, ClusterStack), "the cluster scenario runs on a ClusterStack"
    await run.provider_dice({"delay": 0.3}, delay_ms=600)
    halves = [run.cases[0::2], run.cases[1::2]]
    spread_s = max(run.spread_s / 2, 6.0)
    for queue, cases in zip(LEADERS_KILLED, halves, strict=True):
        # asked before the stream starts: rabbitmqctl takes seconds on a busy machine, and the
        # kill must follow the third claim at once, while contracts and outcomes are in flight
        node = await asyncio.to_thread(stack.cluster.leader, stack.topology.name(queue))
        connected = await asyncio.to_thread(stack.cluster.connections)
        stream = asyncio.create_task(run.driver.approve_stream(cases, spread_s))
        await _under_way(run, cases)
        await asyncio.to_thread(stack.cluster.kill, node)
        run.faults += 1
        await _reconnected_elsewhere(run, connected)
        await run.pause(0.5, 2.0)
        await asyncio.to_thread(stack.cluster.revive, node)
        await stream
    await run.provider_calm()


async def _reconnected_elsewhere(run: Run, before: Counter[str]) -> None:
    """While the node is still down, every service holds as many connections as before the kill:
    those on the dead node moved to the survivors (else the outage stops that service until the
    node is back, which a single-address client survives too; so this is what the address list
    adds, and what its negative control loses)."""
    stack = run.stack
    assert isinstance(stack, ClusterStack)
    if set(before) != set(LABELS):  # the check would prove nothing
        run.extra["services whose connections were not seen"] = len(set(LABELS) - set(before))
    short: dict[str, int] = {}

    async def all_back() -> bool:
        now = await asyncio.to_thread(stack.cluster.connections)
        short.clear()
        short.update({name: n - now[name] for name, n in before.items() if now[name] < n})
        return not short

    try:
        await wait_until(all_back, timeout=30, interval=0.5, what="connections on the survivors")
    except AssertionError:
        key = "services cut off while a node was down"
        run.extra[key] = run.extra.get(key, 0) + len(short)


async def _under_way(run: Run, cases: list[Case]) -> None:
    """Until a third of ``cases`` is claimed (gives up after a while: the kill must come)."""
    orgs = [case.org["id"] for case in cases]

    async def claimed() -> bool:
        rows = await run.stack.rows(
            "SELECT count(*) AS n FROM proposals.proposals "
            "WHERE organization_id = ANY(:o) AND status <> 'pending'",
            o=orgs,
        )
        return bool(rows[0]["n"] >= max(1, len(cases) // 3))

    with contextlib.suppress(AssertionError):
        await wait_until(claimed, timeout=30, interval=0.1, what="a third of the half claimed")


async def cluster_whole_again(run: Run) -> None:
    """Every queue has its consumers back, and every quorum queue all of its replicas."""
    await consumers_back(run)
    stack = run.stack
    assert isinstance(stack, ClusterStack)
    names = {stack.topology.name(spec.key) for spec in QUEUES}
    offline: dict[str, int] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        offline = {
            name: n
            for name, n in (await asyncio.to_thread(stack.cluster.members_offline)).items()
            if name in names
        }
        if not offline:
            return
        await asyncio.sleep(1.0)
    run.extra["queue replicas offline"] = sum(offline.values())


CLUSTER_SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            "10-cluster-leaders",
            "RabbitMQ cluster: contracts' and outcomes' leader nodes kill -9'd",
            leader_kills,
            cluster_whole_again,
            live_proposals=True,
        ),
    )
}
