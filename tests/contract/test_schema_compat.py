"""Every message's schema against its committed snapshot in ``shared/contracts/schemas``.

Three questions, three tests: is the change compatible (else: which field broke how, and the
ways out), is the snapshot current (a compatible change still needs re-exporting, so the next
comparison starts from it), and does every message have a snapshot at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from signoff_contracts import schemas

from .compat import breaking_changes, report

SNAPSHOTS = Path(__file__).resolve().parents[2] / "shared" / "contracts" / "schemas"
EXPORT = "python -m signoff_contracts.schemas export shared/contracts/schemas"
COMMITTED = sorted(p.relative_to(SNAPSHOTS).as_posix() for p in SNAPSHOTS.glob("v*/*.json"))
CURRENT = schemas.snapshot_files()


def _current(relative: str) -> dict[str, object] | None:
    text = CURRENT.get(relative)
    return None if text is None else json.loads(text)


@pytest.mark.parametrize("relative", COMMITTED)
def test_schema_is_compatible_with_its_snapshot(relative: str) -> None:
    name = relative.removesuffix(".json")
    current = _current(relative)
    assert current is not None, (
        f"{name}: the message type was removed from a published version; a published type "
        f"stays for as long as anyone may send it (if it never was, delete {relative})"
    )
    published = json.loads((SNAPSHOTS / relative).read_text(encoding="utf-8"))
    changes = breaking_changes(published, current, name)
    assert not changes, report(name, changes, f"shared/contracts/schemas/{relative}", EXPORT)


@pytest.mark.parametrize("relative", sorted(CURRENT))
def test_snapshot_is_up_to_date(relative: str) -> None:
    path = SNAPSHOTS / relative
    assert path.exists(), f"{relative}: no snapshot for this message yet — run `{EXPORT}`"
    assert path.read_text(encoding="utf-8") == CURRENT[relative], (
        f"{relative}: the schema changed compatibly; re-export and commit it: `{EXPORT}`"
    )


@pytest.mark.parametrize("version", sorted(schemas.versions()))
def test_every_message_of_a_version_package_declares_that_version(version: int) -> None:
    wrong = {
        kind: model.model_fields["version"].default
        for kind, model in schemas.versions()[version].items()
        if model.model_fields["version"].default != version
    }
    assert not wrong, f"messages in v{version} must have version = {version}: {wrong}"


@pytest.mark.parametrize("version", sorted(schemas.versions()))
def test_readers_accept_exactly_what_writers_emit(version: int) -> None:
    """The snapshots are validation schemas; they speak for writers only while both agree."""
    differ = [
        name
        for name, schema in schemas.schemas(version, "serialization").items()
        if schema != schemas.schemas(version, "validation")[name]
    ]
    assert not differ, (
        f"serialization and validation schemas differ for {differ}: decide which one the "
        "snapshot pins (see signoff_contracts.schemas) before publishing"
    )


def test_export_writes_the_snapshots_it_compares(tmp_path: Path) -> None:
    written = schemas.export(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == sorted(CURRENT)
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert text.endswith("}\n") and json.loads(text)
    assert schemas.main(["export", str(tmp_path)]) == 0
    assert schemas.main(["bogus"]) == 2
