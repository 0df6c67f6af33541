"""Loading the domain's parts by entry point, checked at start-up.

``signoff.operations`` names operation classes, ``signoff.directory`` the directory,
``signoff.assistants`` the sections' assistants. An operation missing a part fails here, when a
service starts, not when someone approves.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

import structlog
from signoff_contracts.operations import AnyOperation, Directory, check_operation

log = structlog.get_logger(__name__)


class UnknownOperation(LookupError):
    def __init__(self, kind: str, version: int | None = None) -> None:
        super().__init__(f"unknown operation {kind} v{version}" if version else kind)
        self.kind = kind
        self.version = version


class Operations:
    """The loaded operations, by kind and contract version."""

    def __init__(self, operations: list[AnyOperation]) -> None:
        self._by_key: dict[tuple[str, int], AnyOperation] = {}
        self._latest: dict[str, AnyOperation] = {}
        for op in operations:
            key = (op.kind, op.version)
            if key in self._by_key:
                raise ValueError(f"operation {op.kind} v{op.version} registered twice")
            self._by_key[key] = op
            if op.kind not in self._latest or op.version > self._latest[op.kind].version:
                self._latest[op.kind] = op

    def get(self, kind: str, version: int) -> AnyOperation:
        try:
            return self._by_key[(kind, version)]
        except KeyError:
            raise UnknownOperation(kind, version) from None

    def latest(self, kind: str) -> AnyOperation:
        try:
            return self._latest[kind]
        except KeyError:
            raise UnknownOperation(kind) from None

    def __iter__(self) -> Any:
        return iter(self._by_key.values())

    def versions(self) -> list[tuple[str, int]]:
        return sorted(self._by_key)


def load_operations(group: str = "signoff.operations") -> Operations:
    """Every operation registered under ``group``, each checked for its parts.

    Logs the kinds and versions it found (``operations.loaded``): an operation missing from that
    line is not registered — or, in an editable install, registered after the install: entry
    points are read from the installed metadata, so reinstall the package (``make install``)."""
    loaded = []
    for ep in entry_points(group=group):
        cls = ep.load()
        check_operation(cls)
        loaded.append(cls())
    operations = Operations(loaded)
    log.info(
        "operations.loaded",
        group=group,
        operations=[f"{kind} v{version}" for kind, version in operations.versions()],
    )
    return operations


def load_directory(group: str = "signoff.directory") -> Directory:
    eps = list(entry_points(group=group))
    if len(eps) != 1:
        raise RuntimeError(f"expected exactly one `{group}` entry point, found {len(eps)}")
    directory: Directory = eps[0].load()()
    return directory
