"""Provider clients of the external operations, opened once per process.

A client per call would pay a connection handshake on every contract and lose the pool's limits;
one per operation, opened before the broker starts and closed after it stops, keeps every
in-flight call's client alive for the whole graceful shutdown.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from signoff_contracts.operations import AnyOperation, ExternalOperation

from signoff_runtime.registry import Operations


class Providers:
    def __init__(self) -> None:
        self._clients: dict[tuple[str, int], Any] = {}

    async def open(self, stack: AsyncExitStack, operations: Operations) -> None:
        for op in operations:
            if isinstance(op, ExternalOperation):
                client = await stack.enter_async_context(op.open_provider())
                self._clients[(op.kind, op.version)] = client

    def for_operation(self, op: AnyOperation) -> Any:
        try:
            return self._clients[(op.kind, op.version)]
        except KeyError:
            raise RuntimeError(f"no provider open for {op.kind} v{op.version}") from None
