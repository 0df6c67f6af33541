"""``is_transient``: one table of failures and whether each is worth another try."""

from __future__ import annotations

import asyncpg
import pytest
from signoff_runtime.transient import is_transient
from sqlalchemy import exc as sa_exc


class _Orig(Exception):
    """What SQLAlchemy's asyncpg adapter wraps: an error carrying the server's SQLSTATE."""

    def __init__(self, sqlstate: str | None) -> None:
        super().__init__("db")
        self.sqlstate = sqlstate


def _db(
    sqlstate: str | None, cls: type[sa_exc.DBAPIError] = sa_exc.DBAPIError, *, lost: bool = False
) -> sa_exc.DBAPIError:
    return cls("SELECT 1", {}, _Orig(sqlstate), connection_invalidated=lost)


CASES: list[tuple[str, BaseException, bool]] = [
    # the server's SQLSTATE decides, whatever class the driver wrapped it in
    ("serialization failure", _db("40001"), True),
    ("deadlock", _db("40P01"), True),
    ("statement completion unknown", _db("40003"), True),
    ("integrity violation at commit (40002)", _db("40002"), False),
    ("connection failure", _db("08006"), True),
    ("connection does not exist", _db("08003"), True),
    ("too many connections", _db("53300"), True),
    ("out of memory", _db("53200"), True),
    ("lock timeout", _db("55P03"), True),
    ("statement timeout", _db("57014"), True),
    ("admin shutdown", _db("57P01"), True),
    ("crash shutdown", _db("57P02"), True),
    ("cannot connect now", _db("57P03"), True),
    ("idle session timeout", _db("57P05"), True),
    ("database dropped", _db("57P04"), False),
    ("unique violation", _db("23505", sa_exc.IntegrityError), False),
    ("integrity error on a lost connection", _db("23505", sa_exc.IntegrityError, lost=True), False),
    ("not-null violation", _db("23502"), False),
    ("syntax error", _db("42601", sa_exc.ProgrammingError), False),
    ("permission denied", _db("42501"), False),
    ("division by zero", _db("22012", sa_exc.DataError), False),
    # an operational error that names a permanent SQLSTATE is not retried
    ("operational error naming a syntax error", _db("42601", sa_exc.OperationalError), False),
    # without a SQLSTATE: the connection and the pool tell
    ("connection invalidated by the pool", _db(None, lost=True), True),
    ("operational error, no SQLSTATE", _db(None, sa_exc.OperationalError), True),
    ("interface error, no SQLSTATE", _db(None, sa_exc.InterfaceError), True),
    ("plain DBAPI error, no SQLSTATE", _db(None), False),
    ("pool timeout", sa_exc.TimeoutError("QueuePool limit reached"), True),
    ("disconnection", sa_exc.DisconnectionError("gone"), True),
    # the driver's own errors, outside SQLAlchemy (the relay's and LISTEN's connections)
    ("asyncpg: cannot connect now", asyncpg.exceptions.CannotConnectNowError("starting"), True),
    ("asyncpg: too many connections", asyncpg.exceptions.TooManyConnectionsError("full"), True),
    ("asyncpg: connection lost", asyncpg.exceptions.ConnectionDoesNotExistError("lost"), True),
    ("asyncpg: serialization failure", asyncpg.exceptions.SerializationError("conflict"), True),
    ("asyncpg: unique violation", asyncpg.exceptions.UniqueViolationError("dup"), False),
    # the network and deadlines
    ("connection reset", ConnectionResetError(), True),
    ("connection refused", ConnectionRefusedError(), True),
    ("deadline", TimeoutError(), True),
    ("a socket error", OSError("Multiple exceptions: [Errno 111]"), True),
    # bugs
    ("a bug", RuntimeError("bug"), False),
    ("a bad value", ValueError("bad"), False),
    ("a missing key", KeyError("k"), False),
]


@pytest.mark.parametrize(
    ("failure", "expected"), [(e, t) for _, e, t in CASES], ids=[n for n, _, _ in CASES]
)
def test_each_failure_is_judged_once(failure: BaseException, expected: bool) -> None:
    assert is_transient(failure) is expected
