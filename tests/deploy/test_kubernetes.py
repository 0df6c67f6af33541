"""deploy/k8s: every rendered manifest validates against the Kubernetes schemas (bundled by
``kubernetes-validate``) and the KEDA resources against the committed CRD schemas."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from deploy_files import DEPLOY, yaml_docs
from kustomize_render import render
from signoff_executor.settings import ExecutorGroup
from signoff_runtime.topology import Topology

K8S = DEPLOY / "k8s"
VERSION = "1.33.0"
SERVICES = ("agent", "proposals", "executor", "reconciler")


def crd_schemas() -> dict[str, dict[str, Any]]:
    out = {}
    for path in (K8S / "schemas").glob("*.yaml"):
        for crd in yaml_docs(path):
            group = crd["spec"]["group"]
            for version in crd["spec"]["versions"]:
                key = f"{group}/{version['name']}:{crd['spec']['names']['kind']}"
                out[key] = version["schema"]["openAPIV3Schema"]
    return out


@pytest.fixture(scope="module", params=["base", "overlays/example"])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(K8S / request.param)


def test_every_manifest_validates(rendered: list[dict[str, Any]]) -> None:
    crds = crd_schemas()
    assert rendered
    for doc in rendered:
        key = f"{doc['apiVersion']}:{doc['kind']}"
        if key in crds:
            jsonschema.validate(doc, crds[key])
        else:
            kubernetes_validate.validate(doc, VERSION, strict=True)


def test_a_broken_manifest_is_refused() -> None:
    """The validators are live: a wrong type and an unknown field are caught."""
    doc = next(d for d in render(K8S / "base") if d["kind"] == "Deployment")
    doc["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, VERSION, strict=True)
    scaled = next(d for d in render(K8S / "base") if d["kind"] == "ScaledObject")
    del scaled["spec"]["scaleTargetRef"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, crd_schemas()["keda.sh/v1alpha1:ScaledObject"])


def test_services_have_probes_pdbs_and_a_long_enough_grace() -> None:
    docs = render(K8S / "base")
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for service in SERVICES:
        name = f"signoff-{service}"
        assert {("Deployment", name), ("Service", name), ("PodDisruptionBudget", name)} <= kinds
        deployment = next(
            d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name
        )
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert "/" not in container["image"] and ":" not in container["image"], "unqualified"
        assert pod["terminationGracePeriodSeconds"] > ExecutorGroup().graceful_timeout_s + 15
    assert {("ConfigMap", "signoff"), ("Secret", "signoff")} <= kinds


def test_executors_scale_on_the_contract_queue() -> None:
    docs = render(K8S / "base")
    scaled = next(d for d in docs if d["kind"] == "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "signoff-executor"
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "rabbitmq"
    assert trigger["metadata"]["queueName"] == Topology("signoff").name("executor.contracts")
    auth = next(d for d in docs if d["kind"] == "TriggerAuthentication")
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]


def test_overlay_sets_the_registry() -> None:
    images = {
        c["image"]
        for d in render(K8S / "overlays/example")
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    }
    assert images and all(i.startswith("registry.example.com/signoff/") for i in images), images


def test_renderer_matches_kubectl_kustomize() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: the Python renderer alone is used")
    for target in ("base", "overlays/example"):
        out = subprocess.run(
            [kubectl, "kustomize", str(K8S / target)], capture_output=True, text=True, check=True
        ).stdout
        theirs = sorted(
            (d["kind"], d["metadata"]["name"], yaml.safe_dump(d, sort_keys=True))
            for d in yaml.safe_load_all(out)
        )
        ours = sorted(
            (d["kind"], d["metadata"]["name"], yaml.safe_dump(d, sort_keys=True))
            for d in render(K8S / target)
        )
        assert [t[:2] for t in theirs] == [o[:2] for o in ours]
        assert [t[2] for t in theirs] == [o[2] for o in ours]
