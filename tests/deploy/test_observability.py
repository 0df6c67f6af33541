"""The dashboard and the alert rules read only documented metrics, and the rules parse."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess

import pytest
import yaml
from deploy_files import (
    DEPLOY,
    ROOT,
    alert_exprs,
    base_name,
    dashboard_exprs,
    documented,
    external,
    metric_names,
)
from prometheus_client import REGISTRY
from signoff_runtime.testing.tools import needs_tool

SERVICE_PACKAGES = (
    "signoff_agent",
    "signoff_executor",
    "signoff_proposals",
    "signoff_reconciler",
    "signoff_runtime",
)


def test_metrics_doc_lists_the_required_families() -> None:
    docs = documented()
    required = {
        "signoff_proposals_transitions_total",
        "signoff_proposals_in_state",
        "signoff_proposals_decision_seconds",
        "signoff_proposals_outcome_seconds",
        "signoff_executor_execution_seconds",
        "signoff_executor_outcomes_total",
        "signoff_reconciler_open_checks",
        "signoff_reconciler_oldest_open_check_age_seconds",
        "signoff_outbox_unsent",
        "signoff_outbox_oldest_unsent_age_seconds",
        "signoff_messages_dead_lettered_total",
        "signoff_agent_model_calls_total",
        "signoff_agent_model_tokens_total",
        "signoff_proposals_approval_commands_total",
    }
    assert required <= set(docs), required - set(docs)


def test_documented_metrics_are_defined_in_code() -> None:
    """Importing every metrics module of the services' packages (found, not listed: a new
    feature package's ``metrics`` counts too) registers every documented family."""
    for top in SERVICE_PACKAGES:
        package = importlib.import_module(top)
        for module in pkgutil.walk_packages(package.__path__, f"{top}."):
            if module.name.rsplit(".", 1)[-1] in ("metrics", "http_metrics"):
                importlib.import_module(module.name)

    registered = {
        f"{m.name}_total" if m.type == "counter" else m.name: m.type for m in REGISTRY.collect()
    }
    for name, info in documented().items():
        assert name in registered, f"{name} is documented but not defined"
        assert registered[name] == info["type"], name


def test_metric_name_parser() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, kind) (rate(signoff_x_seconds_bucket{a="b"}[5m])))'
        " / clamp_min(sum(signoff_y_total), 1e-9) > 0.1"
    )
    assert {base_name(n) for n in metric_names(expr)} == {"signoff_x_seconds", "signoff_y_total"}


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_expressions_reference_documented_metrics(source: str) -> None:
    exprs = dashboard_exprs() if source == "dashboard" else alert_exprs()
    assert exprs
    known = set(documented()) | external()
    assert {"up", "rabbitmq_detailed_queue_messages_ready"} <= external()
    used = {base_name(name) for expr in exprs for name in metric_names(expr)}
    assert used, "no metric found in the expressions"
    assert used <= known, f"{source} uses undocumented metrics: {sorted(used - known)}"


def test_dashboard_covers_the_operating_questions() -> None:
    exprs = " ".join(dashboard_exprs())
    for needle in (
        "signoff_proposals_transitions_total",  # the funnel
        "signoff_proposals_in_state",  # state counts
        "histogram_quantile",  # latency percentiles
        "signoff_reconciler_open_checks",  # reconciliation backlog
        "signoff_messages_dead_lettered_total",  # DLQ
        "signoff_outbox_oldest_unsent_age_seconds",  # outbox lag
        "rabbitmq_detailed_queue_messages_ready",  # queue depths, from RabbitMQ's own plugin
        "signoff_http_requests_total",  # request rate and errors by route
    ):
        assert needle in exprs, needle


def test_grafana_provisioning_points_at_the_dashboard() -> None:
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/signoff.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./deploy/grafana/dashboards:{path}:ro" in mounts


def test_alert_rules_parse_with_promtool() -> None:
    promtool = needs_tool("promtool", "apt-get install -y prometheus; .ci/run does")
    done = subprocess.run(
        [promtool, "check", "rules", str(DEPLOY / "prometheus/alerts.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        [promtool, "check", "config", "--syntax-only", str(DEPLOY / "prometheus/prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_cover_the_failure_modes() -> None:
    exprs = " ".join(alert_exprs())
    for needle in (
        "signoff_proposals_contracts_republished_total",  # stuck executing
        "signoff_reconciler_open_checks",  # backlog growing
        "signoff_reconciler_escalated_total",  # inconclusive past the bound: escalated
        "signoff_reconciler_oldest_open_check_age_seconds",  # an uncertain attempt open long
        "signoff_outbox_oldest_unsent_age_seconds",  # outbox lag
        "signoff_messages_dead_lettered_total",  # DLQ not empty
        'result!="ok"',  # error rate
        "signoff_outbox_relay_heartbeat_timestamp_seconds",  # a relay stalled or gone
    ):
        assert needle in exprs, needle


def test_every_service_and_relay_has_an_up_and_an_absent_alert() -> None:
    exprs = " ".join(alert_exprs())
    for service in ("web", "agent", "proposals", "executor", "reconciler"):
        assert "up{job=~" in exprs and service in exprs.split("up{job=~")[1].split("}")[0]
        assert f'absent(up{{job="signoff-{service}"}})' in exprs, service
    for schema in ("proposals", "executor", "reconciler"):
        heartbeat = f'signoff_outbox_relay_heartbeat_timestamp_seconds{{schema="{schema}"}}'
        assert f"absent({heartbeat})" in exprs, schema


def test_the_pile_up_alert_is_one_alert_not_one_per_replica() -> None:
    """Each proposals replica reports the same database count: the rule aggregates first."""
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    [pile_up] = [
        r for g in rules["groups"] for r in g["rules"] if r["alert"] == "SignoffExecutingPileUp"
    ]
    assert pile_up["expr"].startswith("min_over_time(max(signoff_proposals_in_state")


def test_prometheus_scrapes_the_metrics_ports_and_rabbitmq() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    static = {
        name: job["static_configs"][0]["targets"]
        for name, job in jobs.items()
        if "static_configs" in job
    }
    assert static["signoff-web"] == ["web:9100"]
    assert static["signoff-agent"] == ["agent:9101"]
    assert static["signoff-proposals"] == ["proposals:9102"]
    assert jobs["rabbitmq-queues"]["params"] == {"family": ["queue_coarse_metrics"]}
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name, port in (("web", "9100"), ("agent", "9101"), ("proposals", "9102")):
        assert services[name]["environment"]["SIGNOFF_METRICS__PORT"] == port
