"""Every loaded operation is under the conformance kit — and so under its property checks.

The property that whatever a model (or anyone) sends as a request is either refused or resolves
inside the scope's organization — never another tenant's ids, never an amount taken from the
request — is a check of the kit (``signoff_conformance.properties``), run with each operation's
own case: its scope, its valid request, the other organization's ids its out-of-scope requests
name, and what its rows prove (``check_resolved``: the refund's amount recomputed, the broadcast's
audience recounted). So no test here knows an operation by name: this one finds every registered
operation and its kit test, and names an operation that has none.
"""

from __future__ import annotations

import ast
from importlib.metadata import entry_points
from pathlib import Path

from signoff_runtime.registry import load_operations

REPO = Path(__file__).resolve().parents[2]
SKIPPED = {".venv", "__pycache__", "node_modules", ".git"}


def _kit_tests(root: Path) -> dict[str, list[str]]:
    """``module:Class`` of each class some test module assigns to ``operation`` → where."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("test_*.py")):
        if SKIPPED & set(path.relative_to(root).parts):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            alias.asname or alias.name: f"{node.module}:{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
        }
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if not isinstance(stmt, ast.Assign):
                    continue
                if (
                    any(isinstance(t, ast.Name) and t.id == "operation" for t in stmt.targets)
                    and isinstance(stmt.value, ast.Name)
                    and stmt.value.id in imported
                ):
                    where = f"{path.relative_to(root)}::{cls.name}"
                    found.setdefault(imported[stmt.value.id], []).append(where)
    return found


def test_every_registered_operation_has_a_conformance_test() -> None:
    load_operations()  # every registered operation loads and has its parts
    tested = _kit_tests(REPO)
    missing = {
        ep.name: ep.value
        for ep in entry_points(group="signoff.operations")
        if ep.value not in tested
    }
    assert not missing, (
        "registered operations without a conformance test (a test class subclassing "
        "signoff_conformance.OperationConformance with `operation = TheClass` and a `case`):\n"
        + "\n".join(f"  {kind} ({target})" for kind, target in sorted(missing.items()))
    )


def test_the_finder_finds_a_kit_test_and_misses_none(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "from pkg.ops import Thing as T\nfrom signoff_conformance import OperationConformance\n"
        "class TestThing(OperationConformance):\n    operation = T\n"
        "class TestOther:\n    operation = 'not a class'\n"
    )
    assert _kit_tests(tmp_path) == {"pkg.ops:Thing": ["tests/test_x.py::TestThing"]}
