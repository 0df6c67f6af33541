"""FastStream's call recorders without a mock each until a test broker reads one (issue 18).

FastStream 0.7 gives every subscriber's handler and every publisher a ``CallRecorder`` for its
test broker (``TestRabbitBroker``: ``handler.mock``, ``assert_called_once_with``), and each
recorder makes its ``unittest.mock.MagicMock`` as it is built, whether or not a test broker ever
wraps the broker. A service process never does: FastStream records a call only under a test
broker and refuses the mock outside one. Yet each mock is a class of its own with its magic
methods set up (about 12 kB apiece), a few dozen in a service (session 11 counted 462 of their
``MagicProxy`` objects in the proposals service).

``install()`` has each recorder made from then on hold a stand-in that makes the real mock the
first time anything is asked of it (a call, an attribute), so a test broker, if one comes, sees
the mock it always did. Called by ``signoff serve``, as the service's own modules have not yet
built a broker; a process that never calls it (the test suite's test brokers) is unchanged. On
a FastStream whose recorders are built otherwise it does nothing and says so (``False``).
"""

from __future__ import annotations

import importlib
import unittest.mock
from typing import Any

MODULE = "faststream._internal.testing.calls"


class MockOnFirstUse:
    """A ``MagicMock`` made when it is first called or asked for an attribute."""

    __slots__ = ("_mock",)

    def __init__(self) -> None:
        self._mock: unittest.mock.MagicMock | None = None

    def made(self) -> bool:
        """Whether the real mock exists yet (asking does not make it)."""
        return self._mock is not None

    def _real(self) -> unittest.mock.MagicMock:
        if self._mock is None:
            self._mock = unittest.mock.MagicMock()
        return self._mock

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # only for names the stand-in lacks: all but these
        return getattr(self._real(), name)


def install() -> bool:
    """Recorders built from now on make their mock on first use; ``False`` (nothing changed)
    when FastStream is absent or does not build its recorders' mocks the way this expects."""
    try:
        calls = importlib.import_module(MODULE)
    except ImportError:
        return False
    if getattr(calls, "MagicMock", None) is not unittest.mock.MagicMock:
        return False  # already installed, or FastStream changed: leave it as it is
    if not hasattr(calls, "CallRecorder"):
        return False
    calls.MagicMock = MockOnFirstUse
    return True
