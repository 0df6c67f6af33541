"""The compose profile ``cluster``: three RabbitMQ nodes that can form one cluster, and the
override that points every service at all three (docs/rabbitmq-cluster.md). The cluster itself
runs in the fault suite (tests/faults/test_cluster.py); no Docker engine here."""

from __future__ import annotations

import re
from typing import Any

import yaml
from deploy_files import DEPLOY, compose
from signoff_runtime.settings import AmqpSettings, amqp_urls, broker_user
from test_compose_and_interfaces import spec_errors

NODES = ("rabbitmq-1", "rabbitmq-2", "rabbitmq-3")
OVERRIDE = DEPLOY / "rabbitmq" / "cluster.compose.yml"


def _override() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(OVERRIDE.read_text())
    return data


def test_the_profile_holds_three_nodes_with_one_cookie_and_the_cluster_config() -> None:
    services = compose()["services"]
    nodes = [services[name] for name in NODES]
    assert all(node["profiles"] == ["cluster"] for node in nodes)
    assert "profiles" not in services["rabbitmq"], "a plain `up` keeps its single node"
    assert len({node["environment"]["RABBITMQ_ERLANG_COOKIE"] for node in nodes}) == 1
    assert [node["hostname"] for node in nodes] == list(NODES)
    for node in nodes:
        assert any("cluster.conf:" in volume for volume in node["volumes"])
        assert "ports" not in node, "the nodes are reached inside the compose network only"
    config = (DEPLOY / "rabbitmq" / "cluster.conf").read_text()
    named = re.findall(r"^cluster_formation\.classic_config\.nodes\.\d+ = (\S+)$", config, re.M)
    assert named == [f"rabbit@{name}" for name in NODES]


def test_every_quorum_queue_gets_a_replica_on_every_node() -> None:
    job = compose()["services"]["rabbitmq-cluster"]
    script = " ".join(job["command"])
    for name in NODES[1:]:
        assert f"grow rabbit@{name} all" in script
    assert set(job["depends_on"]) == set(NODES[1:])


def test_the_override_points_each_service_at_all_three_nodes_as_itself() -> None:
    base, override = compose()["services"], _override()
    assert spec_errors(override) == []
    for name, service in override["services"].items():
        url = service["environment"]["SIGNOFF_AMQP__URL"]
        hosts = [u.split("@", 1)[1].split("/", 1)[0] for u in amqp_urls(url)]
        assert hosts == [f"{node}:5672" for node in NODES], name
        assert broker_user(url) == broker_user(base[name]["environment"]["SIGNOFF_AMQP__URL"])
        AmqpSettings(url=url)  # one user and vhost: accepted
        condition = service["depends_on"]["rabbitmq-cluster"]["condition"]
        assert condition == "service_completed_successfully"
    signoff = {
        name for name, svc in base.items() if "SIGNOFF_AMQP__URL" in svc.get("environment", {})
    }
    assert signoff <= set(override["services"]), "every service on the broker joins the cluster"
