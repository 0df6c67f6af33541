"""A test that needs a tool this machine lacks: skipped on a developer's machine, failed in CI.

A skip in CI hides a test that never ran, so with ``CI`` set (``.ci/run`` sets it) a missing
Chromium, ``promtool``, ``rabbitmqctl`` or Python package fails the run and names what to
install. Call these before any other check that could skip the test.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def missing(what: str, install: str) -> NoReturn:
    """Skip (the module too, if called at import time) — or fail, in CI."""
    if in_ci():
        pytest.fail(f"CI must run this test: {what} is missing ({install})", pytrace=False)
    pytest.skip(f"{what} is missing ({install})", allow_module_level=True)


def needs_tool(name: str, install: str) -> str:
    """The tool's path; a missing tool skips the test (fails it in CI)."""
    path = shutil.which(name)
    if path is None:
        missing(name, install)
    return path


def needs_module(name: str, install: str) -> ModuleType:
    """``pytest.importorskip`` that fails in CI."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"the Python module {name}", install)
