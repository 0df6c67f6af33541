"""deploy/k8s as a cluster would run it: rendered by ``kubectl kustomize`` where kubectl is
installed (the Python renderer otherwise; another test keeps the two equal), then checked for
what makes it apply and run — each workload's environment is enough for its command in
production, liveness is not readiness, nothing serves before the migrations, no ``replicas``
beside a ScaledObject, and the NetworkPolicies, ServiceAccounts and monitoring are there."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from deploy_files import DEPLOY
from kustomize_render import render
from kustomize_render import target as target_dir
from pydantic import ValidationError
from pydantic_settings import BaseSettings
from signoff_agent.settings import AgentSettings
from signoff_cli.database import DatabaseCommandSettings
from signoff_executor.settings import ExecutorSettings
from signoff_proposals.settings import ProposalsSettings
from signoff_reconciler.settings import ReconcilerSettings
from signoff_runtime.migrations import owners
from signoff_runtime.roles import passwords
from signoff_runtime.settings import ServiceSettings
from signoff_web.settings import WebSettings

Doc = dict[str, Any]
SETTINGS: dict[str, type[BaseSettings]] = {
    "signoff-web": WebSettings,
    "signoff-agent": AgentSettings,
    "signoff-proposals": ProposalsSettings,
    "signoff-executor": ExecutorSettings,
    "signoff-reconciler": ReconcilerSettings,
}


def rendered(name: str) -> list[Doc]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return render(target_dir(name))
    out = subprocess.run(
        [kubectl, "kustomize", str(target_dir(name))], capture_output=True, text=True, check=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def example() -> list[Doc]:
    return rendered("overlays/example")


@pytest.fixture(scope="module")
def base() -> list[Doc]:
    return rendered("base")


def of_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def pod_of(doc: Doc) -> Doc:
    pod: Doc = doc["spec"]["template"]["spec"]
    return pod


def environment(docs: list[Doc], container: Doc) -> dict[str, str]:
    """The variables a container starts with (ConfigMaps and Secrets resolved)."""
    maps, secrets = of_kind(docs, "ConfigMap"), of_kind(docs, "Secret")

    def secret(ref: Doc) -> str:
        data = secrets[ref["name"]]["data"][ref["key"]]
        return base64.b64decode("".join(data.split())).decode()

    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]]["data"])
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif ref := var["valueFrom"].get("secretKeyRef"):
            env[var["name"]] = secret(ref)
        else:
            ref = var["valueFrom"]["configMapKeyRef"]
            env[var["name"]] = maps[ref["name"]]["data"][ref["key"]]
    return env


def settings_under(env: dict[str, str], cls: type[BaseSettings]) -> BaseSettings:
    """``cls`` read from exactly ``env``, as the container would read it."""
    saved = dict(os.environ)
    try:
        for name in [n for n in os.environ if n.startswith(("SIGNOFF_", "OPENAI_"))]:
            del os.environ[name]
        os.environ.update(env)
        return cls()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_the_migration_job_has_what_its_command_reads_in_production(example: list[Doc]) -> None:
    [job] = of_kind(example, "Job").values()
    [container] = pod_of(job)["containers"]
    assert container["args"] == ["signoff", "db", "migrate"]
    env = environment(example, container)
    assert env["SIGNOFF_ENV"] == "prod"
    settings = settings_under(env, DatabaseCommandSettings)
    assert isinstance(settings, DatabaseCommandSettings)
    passwords(settings.db, settings.env)  # every role's password given: not refused
    # what it failed on before: read as a whole service's settings, the Job's environment is
    # refused (no broker user, the guest default) — the migrate command must not need that
    with pytest.raises(ValidationError, match=r"SIGNOFF_AMQP__USERS|guest"):
        settings_under(env, ServiceSettings)


def test_every_workload_has_what_it_reads_in_production(example: list[Doc]) -> None:
    deployments = of_kind(example, "Deployment")
    for name, cls in SETTINGS.items():
        pod = pod_of(deployments[name])
        [container] = pod["containers"]
        assert settings_under(environment(example, container), cls).env == "prod"  # type: ignore[attr-defined]
        for init in pod["initContainers"]:
            waiting = settings_under(environment(example, init), DatabaseCommandSettings)
            assert isinstance(waiting, DatabaseCommandSettings) and waiting.env == "prod"


def test_the_migration_job_is_renamed_per_release_and_cleaned_up(
    base: list[Doc], example: list[Doc]
) -> None:
    [base_job] = of_kind(base, "Job").values()
    [job] = of_kind(example, "Job").values()
    tag = next(
        i["newTag"]
        for i in yaml.safe_load((DEPLOY / "k8s/overlays/example/kustomization.yaml").read_text())[
            "images"
        ]
        if i["name"] == "signoff-tools"
    )
    assert job["metadata"]["name"] == f"{base_job['metadata']['name']}-{tag.replace('.', '-')}"
    assert 0 < job["spec"]["ttlSecondsAfterFinished"] <= 7 * 86400


def test_no_service_serves_before_its_schema_is_migrated(base: list[Doc]) -> None:
    installed = set(owners())
    for name, deployment in of_kind(base, "Deployment").items():
        [wait] = pod_of(deployment)["initContainers"]
        service = name.removeprefix("signoff-")
        assert wait["args"][:4] == ["signoff", "db", "wait", service], name
        assert service in installed, f"{service} has no migrations to wait for"
        assert wait["image"] == pod_of(deployment)["containers"][0]["image"]


def test_liveness_is_the_process_and_readiness_its_dependencies(base: list[Doc]) -> None:
    for name, deployment in of_kind(base, "Deployment").items():
        [container] = pod_of(deployment)["containers"]
        live, ready = container["livenessProbe"], container["readinessProbe"]
        assert live["httpGet"]["path"] == "/livez", name
        assert ready["httpGet"]["path"] == "/readyz", name
        assert container.get("startupProbe", live)["httpGet"]["path"] == "/livez", name
        assert live != ready


def test_no_replicas_beside_a_scaled_object(base: list[Doc], example: list[Doc]) -> None:
    for docs in (base, example):
        scaled = {
            d["spec"]["scaleTargetRef"]["name"] for d in of_kind(docs, "ScaledObject").values()
        }
        assert scaled == {"signoff-executor"}
        for name in scaled:
            assert "replicas" not in of_kind(docs, "Deployment")[name]["spec"], name


def test_every_pod_runs_as_its_own_account_without_a_token(example: list[Doc]) -> None:
    accounts = of_kind(example, "ServiceAccount")
    for doc in example:
        if doc["kind"] in {"Deployment", "Job"} and doc["metadata"]["name"] in accounts | {
            d["metadata"]["name"]: d for d in of_kind(example, "Job").values()
        }:
            pod = pod_of(doc)
            assert pod["serviceAccountName"] in accounts
            assert pod["automountServiceAccountToken"] is False
    assert {f"signoff-{s}" for s in ("web", "agent", "proposals", "executor", "reconciler")} | {
        "signoff-migrate"
    } <= set(accounts)


def _selects(policy: Doc, labels: dict[str, str]) -> bool:
    selector = policy["spec"]["podSelector"]
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    return all(labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", []))


def test_only_the_web_and_the_apis_are_reachable_from_outside(base: list[Doc]) -> None:
    policies = of_kind(base, "NetworkPolicy")
    assert policies, "no NetworkPolicy"
    deny = policies["signoff-default-deny"]
    assert deny["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in deny["spec"]
    open_to_all = {
        name
        for name, deployment in of_kind(base, "Deployment").items()
        for policy in policies.values()
        if _selects(policy, deployment["spec"]["template"]["metadata"]["labels"])
        for rule in policy["spec"].get("ingress", [])
        if "from" not in rule
    }
    assert open_to_all == {"signoff-web", "signoff-agent", "signoff-proposals"}
    for name, deployment in of_kind(base, "Deployment").items():
        assert _selects(deny, deployment["spec"]["template"]["metadata"]["labels"]), name


def test_postgresql_and_rabbitmq_admit_only_signoffs_pods(base: list[Doc]) -> None:
    policies = of_kind(base, "NetworkPolicy")
    for name, port in (("signoff-postgresql", 5432), ("signoff-rabbitmq", 5672)):
        [rule, *others] = policies[name]["spec"]["ingress"]
        assert rule["ports"] == [{"port": port}]
        pods = [f["podSelector"] for f in rule["from"] if "podSelector" in f]
        assert pods == [{"matchLabels": {"app.kubernetes.io/part-of": "signoff"}}]
        namespaces = [f for f in rule["from"] if "podSelector" not in f]
        assert all(f.keys() == {"namespaceSelector"} for f in namespaces), namespaces
        assert all(r["ports"] != [{"port": port}] for r in others)


def test_the_monitoring_component_scrapes_metrics_ports_and_loads_the_alerts(
    example: list[Doc],
) -> None:
    monitors = of_kind(example, "ServiceMonitor")
    assert monitors["signoff"]["spec"]["endpoints"][0]["port"] == "metrics"
    services = of_kind(example, "Service")
    for name in SETTINGS:
        ports = {p["name"] for p in services[name]["spec"]["ports"]}
        assert "metrics" in ports, name
    [rule] = of_kind(example, "PrometheusRule").values()
    alerts = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    assert rule["spec"]["groups"] == alerts["groups"], "copy alerts.yml's groups into the rule"


def test_the_public_apis_do_not_serve_metrics_on_their_service_port(base: list[Doc]) -> None:
    for name in ("signoff-web", "signoff-agent", "signoff-proposals"):
        deployment = of_kind(base, "Deployment")[name]
        [container] = pod_of(deployment)["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert env["SIGNOFF_METRICS__PORT"] == str(ports["metrics"]) != str(ports["http"])
