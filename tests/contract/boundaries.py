"""Who may import whom, read from the source with ``ast`` (nothing is imported or executed).

Every package of the repository is one *unit* in a *layer*, and one table (``MAY_IMPORT``) says
which layers each layer's code may import — itself always included:

======================  ====================================================================
layer (where)           its code may import (first-party)
======================  ====================================================================
contracts               itself; beyond that only the standard library and pydantic
(shared/contracts)
runtime                 contracts
(shared/runtime)
conformance             contracts, runtime
(shared/conformance)
domain (examples/*)     contracts, runtime, the other examples
service (services/*)    contracts, runtime — never another service: services talk only
                        through messages and HTTP
web, cli, bench         contracts, runtime — never a service or the domain: what they show
                        or drive comes through the services' HTTP and AMQP interfaces, and
                        operations and the directory by entry point
client                  contracts alone: adopters install it beside their own code, so it
                        speaks to signoff only over HTTP
======================  ====================================================================

A unit's own tests may also import the domain (their test world), the conformance kit, and
test-support modules (any module living under a ``tests`` directory); production code never
imports a test module, and never changes ``sys.path`` to reach one. The root ``tests/`` suites
test the whole system and may import anything. A package the table does not place (a
``pyproject.toml`` in a new directory) is itself a violation, so no package goes unscanned.
Dynamic imports with a literal name (``importlib.import_module("signoff_x")``, ``__import__``)
count too.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CONTRACTS_MAY_IMPORT = frozenset(sys.stdlib_module_names) | {
    "signoff_contracts",
    "pydantic",
    "pydantic_core",
}
#: the table of the module docstring: layer → the other layers its production code may import
MAY_IMPORT: dict[str, frozenset[str]] = {
    "contracts": frozenset(),
    "runtime": frozenset({"contracts"}),
    "conformance": frozenset({"contracts", "runtime"}),
    "domain": frozenset({"contracts", "runtime"}),
    "service": frozenset({"contracts", "runtime"}),
    "web": frozenset({"contracts", "runtime"}),
    "cli": frozenset({"contracts", "runtime"}),
    "bench": frozenset({"contracts", "runtime"}),
    "client": frozenset({"contracts"}),
}
#: what a unit's own tests may import beyond what its code may
TESTS_MAY_ALSO = frozenset({"domain", "conformance", "tests"})
#: layers whose units may import one another (the domain's examples); in any other layer a unit
#: imports only itself of its own layer (a service never another service)
SHARED_LAYERS = frozenset({"domain"})
_FIXED = {
    "shared/contracts": "contracts",
    "shared/runtime": "runtime",
    "shared/conformance": "conformance",
    "web": "web",
    "cli": "cli",
    "bench": "bench",
    "client": "client",
}
_GROUPS = {"examples": "domain", "services": "service"}
_SKIPPED_DIRS = {".venv", "__pycache__", "build", "dist", ".git", "node_modules"}
_DYNAMIC = {"import_module", "__import__"}


@dataclass(frozen=True)
class Import:
    module: str
    file: Path
    line: int

    @property
    def top(self) -> str:
        return self.module.split(".")[0]


@dataclass(frozen=True)
class Violation:
    file: Path
    line: int
    module: str
    rule: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: imports `{self.module}` — {self.rule}"


@dataclass(frozen=True)
class Unit:
    """One package directory: its layer, the import names it defines, its code and its tests."""

    path: str
    layer: str
    packages: frozenset[str]
    code: tuple[Path, ...]
    tests: Path


def python_files(root: Path) -> Iterator[Path]:
    yield from _walk(root, ".py")


def _walk(root: Path, suffix: str) -> Iterator[Path]:
    """Files under ``root`` ending in ``suffix``, never descending into a virtualenv or a build."""
    found = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith(".egg-info")]
        found += [Path(here) / f for f in files if f.endswith(suffix)]
    yield from sorted(found)


def imports(path: Path) -> list[Import]:
    """Absolute imports of one file, static and literal-dynamic; relative ones stay inside."""
    found = []
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, path, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(Import(node.module, path, node.lineno))
        elif isinstance(node, ast.Call) and _called(node) in _DYNAMIC and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append(Import(first.value, path, node.lineno))
    return found


def units(repo: Path) -> tuple[list[Unit], list[Violation]]:
    """Every package of the repository placed in its layer, and those no rule places."""
    found, unplaced = [], []
    for project in _walk(repo, "pyproject.toml"):
        where = project.parent.relative_to(repo).as_posix()
        if where == ".":
            continue
        layer = _FIXED.get(where) or _GROUPS.get(where.split("/")[0])
        if layer is None:
            unplaced.append(
                Violation(project, 1, where, "no rule says what this package may import")
            )
            continue
        src = project.parent / "src"
        found.append(Unit(where, layer, _packages(src), (src,), project.parent / "tests"))
    bench = repo / "bench"
    if bench.is_dir() and not (bench / "pyproject.toml").exists():
        code = tuple(p for p in sorted(bench.iterdir()) if (p / "__init__.py").exists())
        found.append(Unit("bench", "bench", frozenset(p.name for p in code), code, bench / "tests"))
    return found, unplaced


def test_modules(repo: Path) -> frozenset[str]:
    """Names a test imports its support by: the modules under any ``tests`` directory."""
    names = {
        path.stem for path in python_files(repo) if "tests" in path.relative_to(repo).parts[:-1]
    }
    return frozenset(names - {"__init__"} - sys.stdlib_module_names)


def contracts_violations(repo: Path) -> list[Violation]:
    root = repo / "shared" / "contracts" / "src" / "signoff_contracts"
    return [
        Violation(
            imp.file,
            imp.line,
            imp.module,
            "signoff_contracts may import only the standard library and pydantic",
        )
        for path in python_files(root)
        for imp in imports(path)
        if imp.top not in CONTRACTS_MAY_IMPORT
    ]


def layer_violations(repo: Path) -> list[Violation]:
    placed, found = units(repo)
    owner = {name: unit for unit in placed for name in unit.packages}
    support = test_modules(repo) - set(owner)
    for unit in placed:
        for root, may, what in (
            *((code, MAY_IMPORT[unit.layer], "its code") for code in unit.code),
            (unit.tests, MAY_IMPORT[unit.layer] | TESTS_MAY_ALSO, "its tests"),
        ):
            for path in python_files(root):
                for imp in imports(path):
                    target = owner.get(imp.top)
                    layer = target.layer if target else "tests" if imp.top in support else None
                    if layer is None or target is unit:
                        continue
                    if (layer == unit.layer and layer in SHARED_LAYERS) or layer in may:
                        continue
                    found.append(Violation(imp.file, imp.line, imp.module, _rule(unit, what, may)))
    return found


def sys_path_violations(repo: Path) -> list[Violation]:
    """Production code reaches nothing by changing ``sys.path``: what it imports is a package."""
    placed, _ = units(repo)
    return [
        Violation(path, node.lineno, "sys.path", f"{unit.path}'s code may not change sys.path")
        for unit in placed
        for root in unit.code
        for path in python_files(root)
        for node in _nodes(path)
        if isinstance(node, ast.Call) and _is_sys_path_change(node.func)
    ]


def scan(repo: Path) -> list[Violation]:
    return contracts_violations(repo) + layer_violations(repo) + sys_path_violations(repo)


def _rule(unit: Unit, what: str, may: frozenset[str]) -> str:
    allowed = sorted((may - {"tests"}) | ({unit.layer} if unit.layer in SHARED_LAYERS else set()))
    extra = " and test support" if "tests" in may else ""
    return (
        f"{what} ({unit.path}, layer {unit.layer}) may import only itself, "
        f"{', '.join(allowed) or 'nothing first-party'}{extra}"
    )


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of one file's syntax tree (each file is parsed once per run)."""
    return tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))


def _is_sys_path_change(func: ast.expr) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr in {"insert", "append", "extend"}
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "path"
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "sys"
    )


def _packages(src: Path) -> frozenset[str]:
    return frozenset(
        {p.name for p in src.iterdir() if (p / "__init__.py").exists()} if src.is_dir() else set()
    )


def _called(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""
