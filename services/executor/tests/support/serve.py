"""Run the real executor process (``serve``) with the test operations: ``python -m support.serve``.

Only the operations differ from the entry point: they come from here instead of
``signoff.operations``, since the test domain is not installed as a package.
"""

from __future__ import annotations

from signoff_executor.app import serve
from signoff_runtime.registry import Operations

from support.operations import AddNote, ChargeBoard
from support.provider import FakeProvider

if __name__ == "__main__":
    serve(Operations([AddNote(), ChargeBoard(FakeProvider())]))
