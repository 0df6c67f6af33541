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
from kustomize_render import target as target_dir
from signoff_executor.settings import ExecutorGroup
from signoff_runtime.topology import Topology

K8S = DEPLOY / "k8s"
VERSION = "1.33.0"
SERVICES = ("web", "agent", "proposals", "executor", "reconciler")


def _python_patterns(node: Any) -> Any:
    """Go's RE2 takes a flag group after ``^`` (the Prometheus operator's CRDs do); Python's
    ``re`` only at the start: the same pattern, flags first."""
    if isinstance(node, dict):
        return {
            k: v.replace("^(?i)", "(?i)^")
            if k == "pattern" and isinstance(v, str)
            else _python_patterns(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_python_patterns(v) for v in node]
    return node


def crd_schemas() -> dict[str, dict[str, Any]]:
    out = {}
    for path in (K8S / "schemas").glob("*.yaml"):
        for crd in yaml_docs(path):
            group = crd["spec"]["group"]
            for version in crd["spec"]["versions"]:
                key = f"{group}/{version['name']}:{crd['spec']['names']['kind']}"
                out[key] = _python_patterns(version["schema"]["openAPIV3Schema"])
    return out


@pytest.fixture(scope="module", params=["base", "overlays/example"])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(target_dir(request.param))


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
        for container in pod["initContainers"] + pod["containers"]:
            assert "/" not in container["image"] and ":" not in container["image"], "unqualified"
        assert pod["terminationGracePeriodSeconds"] > ExecutorGroup().graceful_timeout_s + 15
    assert ("ConfigMap", "signoff") in kinds


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
        for d in render(target_dir("overlays/example"))
        for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    }
    assert images and all(i.startswith("registry.example.com/signoff/") for i in images), images


def _unwrapped(doc: dict[str, Any]) -> dict[str, Any]:
    """kustomize wraps a generated Secret's base64 values at 70 columns; the value is the same."""
    if doc["kind"] == "Secret":
        doc["data"] = {k: "".join(v.split()) for k, v in doc.get("data", {}).items()}
    return doc


def test_renderer_matches_kubectl_kustomize() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: the Python renderer alone is used")
    for target in ("base", "overlays/example"):
        out = subprocess.run(
            [kubectl, "kustomize", str(target_dir(target))],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        theirs = sorted(
            (d["kind"], d["metadata"]["name"], yaml.safe_dump(_unwrapped(d), sort_keys=True))
            for d in yaml.safe_load_all(out)
        )
        ours = sorted(
            (d["kind"], d["metadata"]["name"], yaml.safe_dump(d, sort_keys=True))
            for d in render(target_dir(target))
        )
        assert [t[:2] for t in theirs] == [o[:2] for o in ours]
        assert [t[2] for t in theirs] == [o[2] for o in ours]


#: the Secret keys each workload reads: only what it needs (the contract signing key in the
#: proposals service alone; token keys only where tokens are checked; no token private key)
NEEDS = {
    "signoff-web": {"amqp-url-web", "database-url-web", "token-signing-key", "session-secret"},
    "signoff-agent": {
        "amqp-url-agent",
        "database-url-agent",
        "token-public-keys",
        "openai-api-key",
    },
    "signoff-proposals": {
        "amqp-url-proposals",
        "database-url-proposals",
        "token-public-keys",
        "contract-signing-key",
    },
    "signoff-executor": {"amqp-url-executor", "database-url-executor", "contract-verify-keys"},
    "signoff-reconciler": {"amqp-url-reconciler", "database-url-reconciler"},
    "signoff-migrate": {
        "database-url",
        *(
            f"database-password-{s}"
            for s in ("agent", "proposals", "executor", "reconciler", "web")
        ),
    },
    "signoff-rabbitmq": {"amqp-url-keda"},
}


def secret_keys_read(doc: dict[str, Any]) -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("secretKeyRef")
            if isinstance(ref, dict) and ref.get("name") == "signoff":
                found.add(ref["key"])
            if node.get("name") == "signoff" and "key" in node and "parameter" in node:
                found.add(node["key"])  # a KEDA secretTargetRef
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc.get("spec", {}))
    return found


def test_the_base_ships_no_secret_and_each_workload_reads_only_the_keys_it_needs() -> None:
    docs = render(K8S / "base")
    assert not [d for d in docs if d["kind"] == "Secret"], "a committed secret is a public one"
    read = {d["metadata"]["name"]: secret_keys_read(d) for d in docs if secret_keys_read(d)}
    assert read == NEEDS


def test_the_example_overlay_generates_the_secret_every_workload_reads() -> None:
    docs = render(target_dir("overlays/example"))
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    assert secret["metadata"] == {"name": "signoff", "namespace": "signoff-example"}
    assert set(secret["data"]) == set().union(*NEEDS.values())


def test_the_example_overlay_needs_the_file_the_operator_writes() -> None:
    """Unfilled, the overlay does not render: nothing usable is shipped, nothing half-filled."""
    assert not (K8S / "overlays/example/secrets.env").exists()
    with pytest.raises(FileNotFoundError):
        render(K8S / "overlays/example")
