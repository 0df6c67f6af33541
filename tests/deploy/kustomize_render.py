"""A small kustomize renderer: resources (recursively), namespace, images, JSON6902 patches.

Just what ``deploy/k8s`` uses, so the checks need no cluster and no kustomize binary; a test
compares its output with ``kubectl kustomize`` where that is installed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from deploy_files import yaml_docs


def render(directory: Path) -> list[dict[str, Any]]:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for resource in spec.get("resources", []):
        path = directory / resource
        docs += render(path) if path.is_dir() else [copy.deepcopy(d) for d in yaml_docs(path)]
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


def _containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for doc in docs:
        pod = doc.get("spec", {}).get("template", {}).get("spec", {})
        out += pod.get("containers", [])
    return out


def _apply(doc: dict[str, Any], op: dict[str, Any]) -> None:
    assert op["op"] in {"replace", "add"}, op
    *parents, last = op["path"].strip("/").split("/")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = op["value"]
