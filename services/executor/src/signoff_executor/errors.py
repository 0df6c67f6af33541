"""Which failures are worth another delivery, and which are the contract's final answer.

A transient failure (the database or its connection, a lock or statement timeout, a serialization
conflict) says nothing about the contract: the transaction rolled back, the delivery is nacked and
``settle`` requeues it within the queue's delivery limit. Anything else raised by an operation's
own code is deterministic as far as we can tell: retrying would fail the same way, so it becomes
the contract's ``TerminalFailure``.
"""

from __future__ import annotations

from signoff_runtime.consumer import TRANSIENT
from sqlalchemy.exc import DBAPIError

#: serialization failure, deadlock, lock not available, statement timeout / cancel
_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57014"})
#: connection exception, insufficient resources, operator intervention (shutdown, terminated)
_RETRYABLE_CLASSES = ("08", "53", "57P")


def sqlstate(exc: DBAPIError) -> str | None:
    orig = exc.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return str(code) if code else None


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        code = sqlstate(exc) or ""
        if code in _RETRYABLE_SQLSTATES or code.startswith(_RETRYABLE_CLASSES):
            return True
    return isinstance(exc, TRANSIENT)
