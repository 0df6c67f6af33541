"""Run the real executor process (``serve``) with the test operations: ``python -m support.serve``.

Only the operations and the directory differ from the entry points: they come from here instead
of ``signoff.operations`` and ``signoff.directory``, since the test domain is not installed.
"""

from __future__ import annotations

from signoff_executor.app import serve
from signoff_runtime.registry import Operations

from support.directory import MembersDirectory
from support.operations import AddNote, ChargeBoard
from support.provider import FakeProvider

if __name__ == "__main__":
    serve(Operations([AddNote(), ChargeBoard(FakeProvider())]), MembersDirectory())
