"""The repository keeps its import boundaries — and the scanner would notice if it did not."""

from __future__ import annotations

from pathlib import Path

from .boundaries import Violation, contracts_violations, imports, python_files, scan

REPO = Path(__file__).resolve().parents[2]


def test_the_repository_keeps_its_import_boundaries() -> None:
    violations = scan(REPO)
    assert not violations, "import boundaries broken:\n" + "\n".join(map(str, violations))


def test_the_scan_reads_the_contracts_package() -> None:
    files = list(python_files(REPO / "shared" / "contracts" / "src" / "signoff_contracts"))
    assert len(files) >= 10
    assert any(imp.top == "pydantic" for path in files for imp in imports(path))


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def _found(root: Path) -> set[tuple[str, str]]:
    return {(v.file.relative_to(root).as_posix(), v.module) for v in scan(root)}


CONTRACTS = "shared/contracts/src/signoff_contracts"
AGENT = "services/agent/src/signoff_agent"
PROPOSALS = "services/proposals/src/signoff_proposals"
DIRTY = {
    f"{CONTRACTS}/__init__.py": "",
    f"{CONTRACTS}/ok.py": (
        "from __future__ import annotations\nimport json\nfrom pydantic import BaseModel\n"
        "from signoff_contracts.ids import new_id\nfrom . import ids\n"
    ),
    f"{CONTRACTS}/io.py": "import json\n\ndef f():\n    import sqlalchemy.ext.asyncio\n",
    f"{CONTRACTS}/v1/x.py": "from faststream import Context\n",
    f"{AGENT}/__init__.py": "",
    f"{AGENT}/app.py": (
        "from signoff_agent.settings import S\nfrom signoff_contracts.v1 import MESSAGES\n"
        "from signoff_proposals.tables import proposals\n"
    ),
    "services/agent/tests/test_x.py": "import signoff_executor\n",
    f"{PROPOSALS}/__init__.py": "",
    f"{PROPOSALS}/late.py": "import importlib\nimportlib.import_module('signoff_reconciler.app')\n",
    "examples/club/src/club/ops.py": (
        "from signoff_contracts.operations import LocalOperation\n"
        "from signoff_executor.handlers import run\n"
    ),
    "shared/runtime/src/signoff_runtime/bad.py": "x = __import__('signoff_agent')\n",
    ".venv/lib/site.py": "import signoff_agent\n",
}


def test_scanner_finds_every_kind_of_violation(tmp_path: Path) -> None:
    _write(tmp_path, DIRTY)
    assert _found(tmp_path) == {
        (f"{CONTRACTS}/io.py", "sqlalchemy.ext.asyncio"),
        (f"{CONTRACTS}/v1/x.py", "faststream"),
        (f"{AGENT}/app.py", "signoff_proposals.tables"),
        ("services/agent/tests/test_x.py", "signoff_executor"),
        (f"{PROPOSALS}/late.py", "signoff_reconciler.app"),
        ("examples/club/src/club/ops.py", "signoff_executor.handlers"),
        ("shared/runtime/src/signoff_runtime/bad.py", "signoff_agent"),
    }


def test_a_clean_tree_has_no_violations(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            f"{CONTRACTS}/a.py": "import typing\nimport pydantic_core\n",
            "services/executor/src/signoff_executor/app.py": (
                "import signoff_executor.handlers\nfrom signoff_runtime import db\n"
            ),
            "examples/club/src/club/ops.py": "from signoff_contracts import operations\n",
        },
    )
    assert scan(tmp_path) == []


def test_a_violation_reads_as_where_what_and_why(tmp_path: Path) -> None:
    _write(tmp_path, {"shared/contracts/src/signoff_contracts/a.py": "\n\nimport httpx\n"})
    [violation] = contracts_violations(tmp_path)
    assert isinstance(violation, Violation) and violation.line == 3
    assert str(violation).endswith(
        "a.py:3: imports `httpx` — signoff_contracts may import only the standard library and "
        "pydantic"
    )
