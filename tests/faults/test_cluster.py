"""Nothing lost, nothing done twice — on a three-node RabbitMQ cluster that loses queue leaders.

A module of its own: it needs its own servers (PostgreSQL and a private cluster, started side by
side, ~25 s) and its own stack of services on the cluster. The short run (``make test``) runs a
few dozen proposals; ``make faults`` (``SIGNOFF_FAULTS=long``) as many as every other scenario.
Where no cluster can start here (no ``rabbitmq-server``), the test fails under CI and is skipped
elsewhere. docs/rabbitmq-cluster.md holds the results table.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

import pytest
import pytest_asyncio
from faults_cluster import CLUSTER_SCENARIOS, NO_ADDRESS_LIST, ClusterStack, PrivateCluster
from faults_proxy import Proxy
from faults_run import LONG, PROPOSALS, describe, run_scenario
from faults_servers import PrivatePostgres, ServerFailed, signoff_database

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.timeout(1800 if LONG else 420)]

#: a few dozen in the short run (the cluster's start dominates it), else the suite's own number
CLUSTER_PROPOSALS = PROPOSALS if LONG or "SIGNOFF_FAULTS_PROPOSALS" in os.environ else 24


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"no RabbitMQ cluster in CI: {reason}")
    pytest.skip(f"no RabbitMQ cluster here: {reason}")


@pytest.fixture(scope="module")
def cluster_servers() -> Iterator[tuple[PrivatePostgres, PrivateCluster]]:
    try:
        pg, cluster = PrivatePostgres(), PrivateCluster()
    except ServerFailed as exc:
        _unavailable(str(exc))
    try:
        with ThreadPoolExecutor(2) as pool:
            pg_started, cluster_started = pool.submit(pg.start), pool.submit(cluster.start)
            pg_started.result()
            cluster_started.result()
    except ServerFailed as exc:
        cluster.stop()
        pg.stop()
        _unavailable(str(exc))
    try:
        yield pg, cluster
    finally:
        cluster.stop()
        pg.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster_stack(
    cluster_servers: tuple[PrivatePostgres, PrivateCluster],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ClusterStack]:
    pg, cluster = cluster_servers
    db_url, engine = await signoff_database(pg)
    proxy = Proxy()
    logs = tmp_path_factory.mktemp("cluster-logs")
    stack = ClusterStack(pg, cluster.nodes[0], proxy, engine, db_url, logs, cluster=cluster)
    try:
        await asyncio.to_thread(stack.start)
        yield stack
    finally:
        await asyncio.to_thread(stack.stop)
        await stack.http.aclose()
        proxy.close()
        await engine.dispose()


@pytest.mark.parametrize("name", list(CLUSTER_SCENARIOS))
async def test_a_cluster_losing_queue_leaders_loses_nothing(
    cluster_stack: ClusterStack, name: str
) -> None:
    report = await run_scenario(
        cluster_stack, name, scenarios=CLUSTER_SCENARIOS, proposals=CLUSTER_PROPOSALS
    )

    kills = sum(node.kills for node in cluster_stack.cluster.nodes)
    assert report.proposals > 0 and kills == 2, describe(report)
    assert report.violations == 0, f"{describe(report)}\nservice logs: {cluster_stack.log_dir}"
    # a node's loss excuses no case: every proposal must still end succeeded
    assert not report.progress_shortfall, describe(report)


@pytest.mark.skipif(
    not (LONG or os.environ.get("SIGNOFF_FAULTS_CLUSTER_CONTROL") == "1"),
    reason="the negative control runs in the long run (or SIGNOFF_FAULTS_CLUSTER_CONTROL=1)",
)
async def test_without_the_address_list_a_dead_node_cuts_services_off(
    cluster_stack: ClusterStack,
) -> None:
    """The negative control: each service on its first node only. The services on a killed
    node wait for it to come back — nothing is lost (they reconnect to it then), but the
    checker must see them cut off while it was down."""
    report = await run_scenario(
        cluster_stack,
        "10-cluster-leaders",
        NO_ADDRESS_LIST,
        scenarios=CLUSTER_SCENARIOS,
        proposals=CLUSTER_PROPOSALS,
    )

    assert report.extra.get("services cut off while a node was down", 0) > 0, describe(report)
