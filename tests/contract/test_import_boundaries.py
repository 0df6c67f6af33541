"""The repository keeps its import boundaries — and the scanner would notice if it did not."""

from __future__ import annotations

from pathlib import Path

from .boundaries import (
    MAY_IMPORT,
    Violation,
    contracts_violations,
    imports,
    python_files,
    scan,
    units,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_repository_keeps_its_import_boundaries() -> None:
    violations = scan(REPO)
    assert not violations, "import boundaries broken:\n" + "\n".join(map(str, violations))


def test_the_scan_reads_the_contracts_package() -> None:
    files = list(python_files(REPO / "shared" / "contracts" / "src" / "signoff_contracts"))
    assert len(files) >= 10
    assert any(imp.top == "pydantic" for path in files for imp in imports(path))


def test_every_package_is_placed_in_a_layer_and_scanned() -> None:
    placed, unplaced = units(REPO)
    assert unplaced == []
    where = {u.path: u.layer for u in placed}
    for package in ("web", "cli", "bench", "client", "shared/runtime", "examples/club"):
        assert package in where, package
    assert {u.layer for u in placed} == set(MAY_IMPORT)
    for unit in placed:
        code = [f for root in unit.code for f in python_files(root)]
        assert code, f"{unit.path}: no code found to scan"


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
CLUB = "examples/club/src/signoff_club"
WEB = "web/src/signoff_web"
CLI = "cli/src/signoff_cli"
PACKAGES = {
    f"{where}/pyproject.toml": ""
    for where in (
        "shared/contracts",
        "shared/runtime",
        "shared/conformance",
        "services/agent",
        "services/proposals",
        "services/executor",
        "services/reconciler",
        "examples/club",
        "examples/card_provider",
        "web",
        "cli",
        "client",
    )
} | {
    f"{package}/__init__.py": ""
    for package in (
        CONTRACTS,
        AGENT,
        PROPOSALS,
        CLUB,
        WEB,
        CLI,
        "client/src/signoff_client",
        "shared/runtime/src/signoff_runtime",
        "shared/conformance/src/signoff_conformance",
        "services/executor/src/signoff_executor",
        "services/reconciler/src/signoff_reconciler",
        "examples/card_provider/src/signoff_card_provider",
        "bench/signoff_bench",
    )
}
DIRTY = PACKAGES | {
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
    f"{CLUB}/ops.py": (
        "from signoff_contracts.operations import LocalOperation\n"
        "from signoff_executor.handlers import run\nimport signoff_card_provider\n"
    ),
    "shared/runtime/src/signoff_runtime/bad.py": (
        "x = __import__('signoff_agent')\nfrom signoff_conformance import kit\n"
    ),
    f"{WEB}/pages.py": (
        "from signoff_runtime.tokens import issue_token\nfrom signoff_club import tables\n"
        "from signoff_web.apis import Apis\n"
    ),
    "web/tests/test_signin.py": "from signoff_club.seed import seed_organization\nimport web_kit\n",
    "web/tests/web_kit.py": "import signoff_proposals.routes\n",
    f"{CLI}/main.py": "import signoff_proposals.cli\nimport signoff_web.cli\n",
    "bench/signoff_bench/growth.py": (
        "import sys\nsys.path.insert(0, 'tests/e2e')\nfrom e2e_stack import stack_env\n"
        "from signoff_proposals.sweeps import expire_once\nimport signoff_contracts\n"
    ),
    "tests/e2e/e2e_stack.py": "import signoff_proposals\nimport signoff_club\n",
    "client/src/signoff_client/_core.py": (
        "import httpx\nfrom signoff_contracts.v1 import ProposalView\n"
        "from signoff_runtime.tokens import issue_token\n"
    ),
    "tools/pyproject.toml": "",
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
        (f"{CLUB}/ops.py", "signoff_executor.handlers"),
        ("shared/runtime/src/signoff_runtime/bad.py", "signoff_agent"),
        ("shared/runtime/src/signoff_runtime/bad.py", "signoff_conformance"),
        (f"{WEB}/pages.py", "signoff_club"),
        ("web/tests/web_kit.py", "signoff_proposals.routes"),
        (f"{CLI}/main.py", "signoff_proposals.cli"),
        (f"{CLI}/main.py", "signoff_web.cli"),
        ("bench/signoff_bench/growth.py", "sys.path"),
        ("bench/signoff_bench/growth.py", "e2e_stack"),
        ("bench/signoff_bench/growth.py", "signoff_proposals.sweeps"),
        ("client/src/signoff_client/_core.py", "signoff_runtime.tokens"),
        ("tools/pyproject.toml", "tools"),
    }


def test_a_clean_tree_has_no_violations(tmp_path: Path) -> None:
    _write(
        tmp_path,
        PACKAGES
        | {
            f"{CONTRACTS}/a.py": "import typing\nimport pydantic_core\n",
            "services/executor/src/signoff_executor/app.py": (
                "import signoff_executor.handlers\nfrom signoff_runtime import db\n"
            ),
            f"{CLUB}/ops.py": (
                "from signoff_contracts import operations\nimport signoff_card_provider\n"
            ),
            f"{WEB}/app.py": (
                "from signoff_contracts.operations import SignIn\nimport signoff_web\n"
            ),
            "web/tests/test_cards.py": (
                "from signoff_club.operations import refund\nimport web_kit\n"
            ),
            "web/tests/web_kit.py": "from signoff_runtime import tokens\n",
            "bench/signoff_bench/run.py": (
                "import signoff_bench.rig\nfrom signoff_runtime import testing\n"
            ),
            "tests/e2e/e2e_stack.py": "import signoff_proposals\nimport signoff_club\n",
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


def test_a_layer_violation_names_the_layers_that_are_allowed(tmp_path: Path) -> None:
    _write(tmp_path, PACKAGES | {f"{WEB}/pages.py": "from signoff_club import tables\n"})
    [violation] = scan(tmp_path)
    assert str(violation).endswith(
        "pages.py:1: imports `signoff_club` — its code (web, layer web) may import only itself, "
        "contracts, runtime"
    )
