"""The JSON Schema of every message, as committed snapshots and for other languages.

Schemas are generated in pydantic's **validation** mode: a message version is a promise about
what its readers *accept* — every consumer parses with ``model_validate_json`` — and the
compatibility rules (an optional field may be added; a field may not become required; a literal
may not lose a value) are rules about acceptance. For signoff's messages the serialization
schema (what writers emit) is identical, because no message has a computed field, a custom
serializer or an alias; ``tests/contract`` pins that equality, so the day they diverge is a
decision someone makes, not an accident the snapshot hides.

Everything here is a pure function except ``main`` (``python -m signoff_contracts.schemas
export DIR``), the one place this package writes files — for the snapshot and the Makefile.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

import signoff_contracts
from signoff_contracts.outcomes import outcome_adapter

Mode = Literal["validation", "serialization"]
Schema = dict[str, Any]
#: file stem of the outcome union's schema (not a message: it rides inside several)
OUTCOME = "outcome"
_VERSION_PACKAGE = re.compile(r"^v(\d+)$")


def message_schema(model: type[BaseModel], mode: Mode = "validation") -> Schema:
    return model.model_json_schema(mode=mode)


def outcome_schema(mode: Mode = "validation") -> Schema:
    return outcome_adapter.json_schema(mode=mode)


def versions() -> dict[int, dict[str, type[BaseModel]]]:
    """Every message version package (``signoff_contracts.v1``, ``v2``…) → its ``MESSAGES``."""
    found = {}
    for info in pkgutil.iter_modules(signoff_contracts.__path__):
        match = _VERSION_PACKAGE.match(info.name)
        if match and info.ispkg:
            module = importlib.import_module(f"signoff_contracts.{info.name}")
            found[int(match.group(1))] = dict(module.MESSAGES)
    return dict(sorted(found.items()))


def schemas(version: int, mode: Mode = "validation") -> dict[str, Schema]:
    """Message type → schema for one version, plus the outcome union under ``OUTCOME``."""
    result = {kind: message_schema(model, mode) for kind, model in versions()[version].items()}
    result[OUTCOME] = outcome_schema(mode)
    return dict(sorted(result.items()))


def render(schema: Schema) -> str:
    """Stable text for a snapshot: sorted keys, two-space indent, one newline at the end."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def snapshot_files() -> dict[str, str]:
    """Relative path (``v1/execution.contract.json``) → file text, for every version."""
    return {
        f"v{version}/{name}.json": render(schema)
        for version in versions()
        for name, schema in schemas(version).items()
    }


def export(root: Path) -> list[Path]:
    """Write every snapshot under ``root``; files of removed messages are left for review."""
    written = []
    for relative, content in snapshot_files().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "export":
        sys.stderr.write("usage: python -m signoff_contracts.schemas export DIR\n")
        return 2
    for path in export(Path(args[1])):
        sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
