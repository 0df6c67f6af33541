"""Is this failure worth another try? One answer for consumers, loops, the executor and HTTP.

A transient failure says "not now", never "wrong": the transaction rolled back and the same
work may succeed in a moment. ``settle`` requeues such a delivery (within the queue's delivery
limit), the executor does not turn it into the contract's ``TerminalFailure``, the dead-letter
archive retries it sooner, and an HTTP handler answers ``503`` with ``Retry-After``.

PostgreSQL says which it is in the SQLSTATE, so a database error is judged by its code, not by
the class the driver wraps it in (asyncpg's serialization failure and a lost connection arrive
as the same ``DBAPIError``; an ``IntegrityError`` is never transient, whatever wraps it):

- class ``08`` connection exception, ``53`` insufficient resources (too many connections, out of
  memory or disk), ``40`` transaction rollback (serialization failure, deadlock, completion
  unknown) except ``40002`` (an integrity constraint found at commit: it fails again);
- ``55P03`` lock not available (``lock_timeout``), ``57014`` query cancelled
  (``statement_timeout``), ``57P01``/``57P02``/``57P03`` the server shutting down, crashed or
  starting, ``57P05`` an idle session timed out — but not ``57P04`` (the database was dropped).

Without a SQLSTATE: a connection the pool invalidated, a pool timeout, a disconnection, an
``OSError`` or ``TimeoutError`` (a socket, a DNS lookup, a deadline), and the driver's
operational and interface errors (a connection closed under a statement).
"""

from __future__ import annotations

import asyncpg
from sqlalchemy import exc as sa_exc

_CLASSES = ("08", "40", "53")
_CODES = frozenset({"55P03", "57014", "57P01", "57P02", "57P03", "57P05"})
_NEVER = frozenset({"40002"})

_WITHOUT_SQLSTATE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    sa_exc.TimeoutError,
    sa_exc.DisconnectionError,
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
)


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE ``exc`` carries (SQLAlchemy's wrapper or the driver's own error), if any."""
    if isinstance(exc, sa_exc.DBAPIError):
        exc = exc.orig if exc.orig is not None else exc
    code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    return str(code) if code else None


def transient_sqlstate(code: str) -> bool:
    """Whether a SQLSTATE means "not now" (see the module docstring)."""
    if code in _NEVER:
        return False
    return code in _CODES or code[:2] in _CLASSES


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` may well not happen again if the same work is tried a moment later."""
    if isinstance(exc, sa_exc.IntegrityError | asyncpg.IntegrityConstraintViolationError):
        return False
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    code = sqlstate(exc)
    if code is not None:
        return transient_sqlstate(code)
    return isinstance(exc, _WITHOUT_SQLSTATE)
