"""SQLAlchemy's asyncio engine without its ORM: what a service process loads (issue 18).

signoff uses SQLAlchemy Core through ``AsyncEngine`` and ``AsyncConnection`` only. The package
they live in, ``sqlalchemy.ext.asyncio``, imports its ``AsyncSession`` in its ``__init__``, and
with it the whole ORM: ≈ 40 modules and 6 to 8 MB of every service's resident memory, for classes
no service calls.

``install()`` puts the package in ``sys.modules`` unexecuted, loads its ``engine`` and ``result``
modules (which need no ORM) and names their classes on it, as its ``__init__`` would. Any other
name asked of it (``AsyncSession``, ``async_sessionmaker`` …) runs the real ``__init__`` first,
so code that does use the sessions still gets them, only later. Called by ``signoff serve``
before anything imports SQLAlchemy's asyncio package; a process that never calls it is
unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from typing import Any

PACKAGE = "sqlalchemy.ext.asyncio"
#: what the package's ``__init__`` re-exports from its two ORM-free modules
_ENGINE_NAMES = (
    "AsyncConnection",
    "AsyncEngine",
    "AsyncTransaction",
    "async_engine_from_config",
    "create_async_engine",
    "create_async_pool_from_url",
)
_RESULT_NAMES = ("AsyncMappingResult", "AsyncResult", "AsyncScalarResult", "AsyncTupleResult")


def install() -> bool:
    """Load the asyncio engine without the ORM; ``False`` (and nothing done) when the package is
    already imported."""
    if PACKAGE in sys.modules:
        return False
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)
    submodules = {found.name for found in pkgutil.iter_modules(spec.submodule_search_locations)}
    loader = spec.loader

    def complete(name: str) -> Any:
        # a submodule is the import system's to load (``from . import exc`` asks for it here
        # first); a dunder is a probe that must not load anything
        if name in submodules or name.startswith("__"):
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
        del package.__dict__["__getattr__"]
        loader.exec_module(package)  # the real __init__: its sessions, and with them the ORM
        return getattr(package, name)

    package.__dict__["__getattr__"] = complete  # PEP 562: asked only for a name not set here
    sys.modules[PACKAGE] = package
    parent, _, child = PACKAGE.rpartition(".")
    setattr(sys.modules[parent], child, package)  # as the import system binds a submodule
    try:
        engine = importlib.import_module(f"{PACKAGE}.engine")
        result = importlib.import_module(f"{PACKAGE}.result")
    except BaseException:
        del sys.modules[PACKAGE]
        delattr(sys.modules[parent], child)
        raise
    for name in _ENGINE_NAMES:
        setattr(package, name, getattr(engine, name))
    for name in _RESULT_NAMES:
        setattr(package, name, getattr(result, name))
    return True
