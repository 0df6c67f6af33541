"""A small kustomize renderer: resources (recursively), components, namespace, images, JSON6902
patches, secret generators from env files.

Just what ``deploy/k8s`` uses, so the checks need no cluster and no kustomize binary; a test
compares its output with ``kubectl kustomize`` where that is installed. ``target`` gives the
directory to render: the example overlay needs the ``secrets.env`` an operator writes, so it is
rendered from a copy where that file was written as ``secrets.env.example`` says.
"""

from __future__ import annotations

import atexit
import base64
import copy
import functools
import json
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml
from deploy_files import DEPLOY, yaml_docs
from signoff_runtime import keys


def target(name: str) -> Path:
    """``deploy/k8s/<name>``, or for an overlay with a secret generator, a filled-in copy."""
    if (DEPLOY / "k8s" / name / "secrets.env.example").exists():
        return _filled() / name
    return DEPLOY / "k8s" / name


@functools.cache
def _filled() -> Path:
    """deploy/k8s copied once per session, each overlay's secrets.env written as documented."""
    root = Path(tempfile.mkdtemp(prefix="signoff-k8s-"))
    atexit.register(shutil.rmtree, root, True)
    shutil.copytree(DEPLOY / "k8s", root, dirs_exist_ok=True)
    for example in root.rglob("secrets.env.example"):
        lines = []
        for line in example.read_text().splitlines():
            name, sep, _ = line.partition("=")
            lines.append(f"{name}={_generated(name)}" if sep and not line.startswith("#") else line)
        example.with_name("secrets.env").write_text("\n".join(lines) + "\n")
    return root


def _generated(name: str) -> str:
    """What an operator following secrets.env.example writes for ``name``."""
    kid, private, public = keys.generate()
    if name in {"contract-signing-key", "token-signing-key"}:
        return private
    if name.endswith("-keys"):
        return json.dumps({kid: public})
    if name.startswith("database-url"):
        role = "signoff" + name.removeprefix("database-url").replace("-", "_")
        return f"postgresql+asyncpg://{role}:{secrets.token_urlsafe(18)}@postgres:5432/signoff"
    if name.startswith("amqp-url-"):
        user = "executor" if name == "amqp-url-keda" else name.removeprefix("amqp-url-")
        return f"amqp://{user}:{secrets.token_urlsafe(18)}@rabbitmq:5672/"
    return secrets.token_urlsafe(24)


def _generate_secrets(directory: Path, spec: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for generator in spec.get("secretGenerator", []):
        data: dict[str, str] = {}
        for env in generator.get("envs", []):
            for line in (directory / env).read_text().splitlines():
                name, sep, value = line.partition("=")
                if sep and not line.lstrip().startswith("#"):
                    data[name.strip()] = base64.b64encode(value.encode()).decode()
        assert spec.get("generatorOptions", {}).get("disableNameSuffixHash"), "no hash suffixes"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": generator["name"]},
                "type": "Opaque",
                "data": data,
            }
        )
    return out


def render(directory: Path) -> list[dict[str, Any]]:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for resource in spec.get("resources", []):
        path = directory / resource
        docs += render(path) if path.is_dir() else [copy.deepcopy(d) for d in yaml_docs(path)]
    for component in spec.get("components", []):
        docs += _component(directory / component)
    docs += _generate_secrets(directory, spec)
    for label in spec.get("labels", []):
        for doc in docs:
            doc["metadata"].setdefault("labels", {}).update(label["pairs"])
    if "namespace" in spec:
        for doc in docs:
            doc["metadata"]["namespace"] = spec["namespace"]
    for image in spec.get("images", []):
        for container in _containers(docs):
            if container["image"] == image["name"]:
                container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    for patch in spec.get("patches", []):
        target = patch["target"]
        for doc in docs:
            if doc["kind"] == target["kind"] and doc["metadata"]["name"] == target["name"]:
                for op in yaml.safe_load(patch["patch"]):
                    _apply(doc, op)
    return docs


def _component(directory: Path) -> list[dict[str, Any]]:
    """A ``kind: Component``: its resources added; its patches applied to everything so far."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert spec["kind"] == "Component" and not spec.get("patches"), "only resources are supported"
    return [copy.deepcopy(d) for r in spec.get("resources", []) for d in yaml_docs(directory / r)]


def _containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for doc in docs:
        pod = doc.get("spec", {}).get("template", {}).get("spec", {})
        out += pod.get("initContainers", []) + pod.get("containers", [])
    return out


def _apply(doc: dict[str, Any], op: dict[str, Any]) -> None:
    assert op["op"] in {"replace", "add"}, op
    *parents, last = op["path"].strip("/").split("/")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = op["value"]
