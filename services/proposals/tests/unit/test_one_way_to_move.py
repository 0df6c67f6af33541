"""``transitions`` is the only code that writes a proposal's status.

Read from the source: no other module of the service builds an ``update(proposals)`` that sets
``status``, nor a SQL string that updates ``proposals.proposals``' status.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import signoff_proposals

PACKAGE = Path(signoff_proposals.__file__).parent
ALLOWED = {PACKAGE / "lifecycle" / "transitions.py"}
RAW = re.compile(r"UPDATE\s+proposals\.proposals\b.*\bSET\b.*\bstatus\s*=", re.I | re.S)


def _updates_proposals(node: ast.AST) -> bool:
    """Is ``node`` a chain of method calls starting at ``update(proposals)``?"""
    while isinstance(node, ast.Call):
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "update"
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "proposals"
        ):
            return True
        if not isinstance(node.func, ast.Attribute):
            return False
        node = node.func.value
    return False


def _status_writers(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "values"
            and _updates_proposals(node.func.value)
            and any(k.arg in ("status", None) for k in node.keywords)
        ):
            found.append(node.lineno)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and RAW.search(node.value)
        ):
            found.append(node.lineno)
    return found


def test_only_transitions_writes_a_proposals_status():
    writers = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in ALLOWED and "migrations" not in path.parts
        if (lines := _status_writers(path))
    }
    assert writers == {}


def test_the_check_sees_a_status_write():
    """The negative control: ``transitions`` itself is found by the same check."""
    assert _status_writers(PACKAGE / "lifecycle" / "transitions.py")
