"""Modules a service imports but seldom runs, loaded on their first use (issue 18).

PyJWT imports ``cryptography.x509`` with its algorithms, for the one case of a key given as a
DER certificate. signoff's keys are Ed25519 key objects, so no service reads a certificate, yet
the package's classes (names, extensions, OIDs, certificate transparency) are loaded in each
service that checks a token: the agent, the proposals service and the web. Deferred, measured
side by side (docs/benchmarks.md, session 11): the agent 1.7 MB smaller at start and at its
peak, the proposals service 0.8 MB smaller at start (its peak, set by the load, unchanged).

``install()`` adds a finder to the import system that hands each such module to the standard
library's ``importlib.util.LazyLoader``: importing it binds a module object (on its parent too,
as always), and its code runs on the first attribute read. A certificate, if one ever comes, is
read by the real module. Nothing is imported by ``install`` itself, so a service that never
imports PyJWT still loads no cryptography. Called by ``signoff serve``; a process that never
calls it is unchanged.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

#: imported at start by a service, run only when used. (SQLAlchemy's PostgreSQL catalogue
#: tables, 0.56 MB, cannot be: the psycopg dialect, which the package runs, imports names from it;
#: the unused drivers' dialects are 0.2 MB together, not worth it.)
DEFERRED = ("cryptography.x509",)


class _Deferring(importlib.abc.MetaPathFinder):
    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)
        #: the names being looked up now: another finder that asks the whole of ``sys.meta_path``
        #: in turn (an import hook, a profiler) asks this one again, and is told no
        self._finding: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            spec = self._others(fullname, path, target)
        finally:
            self._finding.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # not found, a namespace package or an old-style loader: as it is
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec

    def _others(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is not self and find is not None:
                spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
                if spec is not None:
                    return spec
        return None


def install(names: Sequence[str] = DEFERRED) -> bool:
    """Defer ``names`` from now on; ``False`` when already installed (once per process)."""
    if any(isinstance(finder, _Deferring) for finder in sys.meta_path):
        return False
    sys.meta_path.insert(0, _Deferring(names))
    return True


def is_deferred(name: str) -> bool:
    """Whether ``name`` was imported and its code has not run yet (``type`` reads no attribute,
    so asking does not load it)."""
    return type(sys.modules.get(name)).__name__ == "_LazyModule"
