"""Each image holds only what it runs: its package set has no development or benchmark package,
it is exactly what its requirement files resolve to, and it covers what its code imports.

No Docker needed: an image's third-party set is its hashed lock (``requirements/<set>.txt``,
which ``pip install --require-hashes`` installs as it stands), and the resolution is computed
offline from the installed distributions' metadata (the developers' environment holds every
package at the same pins). ``deploy/docker/measure-images.sh`` builds the same sets for real.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Mapping
from functools import cache
from importlib import metadata

import pytest
from deploy_files import DEPLOY, ROOT, compose
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REQUIREMENTS = ROOT / "requirements"
SERVICES = ("services/proposals", "services/executor", "services/reconciler", "services/agent")
CORE = (
    "shared/contracts",
    "shared/runtime",
    "cli",
    "examples/card_provider",
    "examples/scripted_model",
    "examples/club",
)
#: image → (its package set, signoff's packages in it): the Dockerfile's stages say the same
IMAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "proposals": ("runtime", (*CORE, "services/proposals")),
    "executor": ("runtime", (*CORE, "services/executor")),
    "reconciler": ("runtime", (*CORE, "services/reconciler")),
    "agent": ("agent", (*CORE, "services/agent")),
    "web": ("web", (*CORE, "web")),
    "tools": ("tools", (*CORE, *SERVICES, "web")),
    "provider": ("simulators", CORE[3:]),
    "model": ("simulators", CORE[3:]),
}
#: modules an image loads of a package it holds for them alone: the scripted model reads the
#: club's model scripts (entry point ``signoff.model_scripts``), none of its operations
ONLY = {"examples/club": {"provider": ("model_scripts",), "model": ("model_scripts",)}}
#: no image may hold these (and so nothing they pull in that an image does not need)
NEVER = {
    "pytest", "pytest-asyncio", "pytest-timeout", "pytest-xdist", "hypothesis", "testcontainers",
    "mypy", "ruff", "py-spy", "playwright", "kubernetes-validate", "jsonschema",
    "check-jsonschema", "honcho", "langgraph", "langgraph-checkpoint-postgres", "langchain-core",
    "psycopg", "psycopg-pool", "uv",
}  # fmt: skip


def pinned(lock: str) -> set[str]:
    """The packages a hashed lock installs."""
    text = (REQUIREMENTS / f"{lock}.txt").read_text()
    return {canonicalize_name(m) for m in re.findall(r"^([A-Za-z0-9._-]+)==", text, re.M)}


def direct(set_name: str) -> list[Requirement]:
    """A requirement file's own lines, its ``-r`` includes followed."""
    found: list[Requirement] = []
    for line in (REQUIREMENTS / f"{set_name}.in").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            found += direct(line.removeprefix("-r ").strip().removesuffix(".in"))
        elif line:
            found.append(Requirement(line))
    return found


def resolved(set_name: str) -> set[str]:
    """Every package the set needs on this Python: its requirements and theirs, with extras and
    environment markers as pip applies them."""
    seen: set[str] = set()
    pending = [(r, frozenset(r.extras)) for r in direct(set_name)]
    while pending:
        requirement, extras = pending.pop()
        name = canonicalize_name(requirement.name)
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        for line in metadata.requires(name) or []:
            child = Requirement(line)
            wanted = [{"extra": e} for e in extras] or [{"extra": ""}]
            if child.marker is None or any(child.marker.evaluate(env) for env in wanted):
                pending.append((child, frozenset(child.extras)))
    return {key.split("[")[0] for key in seen}


@pytest.mark.parametrize("set_name", sorted({s for s, _ in IMAGES.values()}))
def test_an_image_set_holds_no_development_or_benchmark_package(set_name: str) -> None:
    found = resolved(set_name)
    assert found == pinned(set_name), "the lock is stale: run `make requirements`"
    assert not found & NEVER, sorted(found & NEVER)


def test_the_check_sees_development_packages_where_they_are() -> None:
    """The resolution is live: the developers' set does pull in pytest, mypy and LangGraph."""
    everything = resolved("requirements")
    assert {"pytest", "mypy", "ruff", "langgraph", "playwright", "py-spy"} <= everything
    assert everything == pinned("requirements")
    assert resolved("runtime") < resolved("agent") < everything


@cache
def _distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


def imported_distributions(package: str, only: tuple[str, ...] = ()) -> set[str]:
    """The third-party distributions a signoff package's code imports (test helpers aside:
    ``testing`` modules run only under the developers' set), or those of its ``only`` modules."""
    modules: set[str] = set()
    for path in (ROOT / package / "src").rglob("*.py"):
        if "testing" in path.relative_to(ROOT / package / "src").parts or path.stem == "testing":
            continue
        if only and path.stem not in only:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = {
        m for m in modules if m not in sys.stdlib_module_names and not m.startswith("signoff_")
    }
    return {canonicalize_name(d) for m in third_party for d in _distributions().get(m, [m])}


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_an_image_set_covers_what_its_code_imports(image: str) -> None:
    set_name, packages = IMAGES[image]
    needed = set().union(
        *(imported_distributions(p, ONLY.get(p, {}).get(image, ())) for p in packages)
    )
    assert needed, "the import scan found nothing"
    assert needed <= pinned(set_name), sorted(needed - pinned(set_name))


def test_the_import_scan_sees_a_missing_package() -> None:
    """The agent's code imports openai, which the runtime set lacks."""
    assert "openai" in imported_distributions("services/agent")
    assert "openai" not in pinned("runtime")


def _stages() -> dict[str, list[str]]:
    """Dockerfile stage name → its instructions (continuation lines joined)."""
    text = (DEPLOY / "docker/Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            name = line.split(" AS ")[-1].strip()
            current = stages.setdefault(name, [line])
        elif line.strip() and not line.startswith("#"):
            current.append(line)
    return stages


def test_the_dockerfile_builds_each_image_from_the_shared_base_with_its_own_set() -> None:
    stages = _stages()
    for image, (set_name, packages) in IMAGES.items():
        final = stages[image]
        assert final[0] == f"FROM base AS {image}", final[0]
        venv = "venv-simulators" if set_name == "simulators" else f"venv-{image}"
        assert f"COPY --from={venv} /opt/signoff /opt/signoff" in final
        assert "USER 10001" in final and any(i.startswith("CMD [") for i in final)
        assert stages[venv][0] == f"FROM set-{set_name} AS {venv}"
        installs = " ".join(stages[venv])
        for package in packages:
            if package not in CORE or image not in {"provider", "model"}:
                assert f"/src/{package}" in installs or "$CORE" in installs, (image, package)
        assert f"-r /src/requirements/{set_name}.txt" in " ".join(stages[f"set-{set_name}"])
        assert "--require-hashes" in " ".join(stages[f"set-{set_name}"])
        assert "--no-deps" in installs and "-e " not in installs
    assert "useradd" in " ".join(stages["base"])


def test_compose_builds_each_service_from_its_own_target() -> None:
    services = compose()["services"]
    for name in ("agent", "proposals", "executor", "reconciler", "web", "provider", "model"):
        build = services[name]["build"]
        assert build == {"context": ".", "dockerfile": "deploy/docker/Dockerfile", "target": name}
        assert services[name]["image"] == f"signoff-{name}"
    assert services["migrate"]["build"]["target"] == "tools"
    assert services["seed"]["image"] == "signoff-tools"
