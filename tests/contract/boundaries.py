"""Who may import whom, read from the source with ``ast`` (nothing is imported or executed).

The rules are the architecture's seams: ``signoff_contracts`` is vocabulary any process can load,
so it depends on the standard library and pydantic alone; services talk only through messages,
so none imports another; the domain (``examples/``) and the shared packages sit beneath the
services, so neither imports one. Dynamic imports with a literal name
(``importlib.import_module("signoff_x")``, ``__import__``) count too.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SERVICES = frozenset(
    {"signoff_agent", "signoff_proposals", "signoff_executor", "signoff_reconciler"}
)
CONTRACTS_MAY_IMPORT = frozenset(sys.stdlib_module_names) | {
    "signoff_contracts",
    "pydantic",
    "pydantic_core",
}
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


def python_files(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*.py")):
        parts = set(path.relative_to(root).parts)
        if not parts & _SKIPPED_DIRS and not any(p.endswith(".egg-info") for p in parts):
            yield path


def imports(path: Path) -> list[Import]:
    """Absolute imports of one file, static and literal-dynamic; relative ones stay inside."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, path, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(Import(node.module, path, node.lineno))
        elif isinstance(node, ast.Call) and _called(node) in _DYNAMIC and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append(Import(first.value, path, node.lineno))
    return found


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


def service_violations(repo: Path) -> list[Violation]:
    found = []
    services = repo / "services"
    for service in sorted(p for p in services.iterdir() if p.is_dir()) if services.is_dir() else []:
        own = {f"signoff_{service.name}"} | _packages(service / "src")
        for path in python_files(service):
            found += [
                Violation(
                    imp.file,
                    imp.line,
                    imp.module,
                    f"services/{service.name} may not "
                    "import another service (talk through messages in signoff_contracts)",
                )
                for imp in imports(path)
                if imp.top in SERVICES and imp.top not in own
            ]
    return found


def lower_layer_violations(repo: Path) -> list[Violation]:
    """``examples/`` (the domain) and ``shared/`` never import a service."""
    return [
        Violation(imp.file, imp.line, imp.module, f"{layer}/ may not import a service")
        for layer in ("examples", "shared")
        for path in python_files(repo / layer)
        for imp in imports(path)
        if imp.top in SERVICES
    ]


def scan(repo: Path) -> list[Violation]:
    return contracts_violations(repo) + service_violations(repo) + lower_layer_violations(repo)


def _packages(src: Path) -> set[str]:
    return (
        {p.name for p in src.iterdir() if (p / "__init__.py").exists()} if src.is_dir() else set()
    )


def _called(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""
