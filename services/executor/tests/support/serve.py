"""Run the real executor process (``serve``) with the test operations: ``python -m support.serve``.

Only the operations and the directory differ from the entry points: they come from here instead
of ``signoff.operations`` and ``signoff.directory``, since the toy domain is never registered.
"""

from __future__ import annotations

from signoff_conformance.toy.directory import ToyDirectory
from signoff_conformance.toy.vouchers import SendVoucher, VoucherProvider
from signoff_executor.app import serve
from signoff_runtime.registry import Operations

from support.toy import FaultyGrant

if __name__ == "__main__":
    serve(Operations([FaultyGrant(), SendVoucher(VoucherProvider())]), ToyDirectory())
