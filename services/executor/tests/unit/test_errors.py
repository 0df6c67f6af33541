from signoff_executor.errors import is_transient
from sqlalchemy.exc import DBAPIError


def _db_error(sqlstate: str | None = None, invalidated: bool = False) -> DBAPIError:
    orig = Exception("db")
    orig.sqlstate = sqlstate  # type: ignore[attr-defined]
    return DBAPIError("SELECT 1", {}, orig, connection_invalidated=invalidated)


def test_lost_connections_and_conflicts_are_transient() -> None:
    assert is_transient(ConnectionResetError())
    assert is_transient(TimeoutError())
    assert is_transient(_db_error(invalidated=True))
    for code in ("40001", "40P01", "55P03", "57014", "08006", "57P01", "53300"):
        assert is_transient(_db_error(code)), code


def test_bugs_and_constraint_violations_are_not() -> None:
    assert not is_transient(RuntimeError("bug"))
    assert not is_transient(_db_error("23505"))
    assert not is_transient(_db_error(None))
