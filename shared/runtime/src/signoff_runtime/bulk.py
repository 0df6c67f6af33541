"""Many rows in one INSERT whose text does not depend on how many there are.

``INSERT … VALUES (…), (…)`` is a different statement for every row count, and SQLAlchemy does
not cache multi-row VALUES at all: each call would compile anew. ``insert_rows`` instead binds
one array per column and selects from ``unnest`` of them — one statement text, compiled once and
prepared once by asyncpg, for one row or a hundred.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Table, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.postgresql.dml import Insert


def insert_rows(
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    same: Mapping[str, ColumnElement[Any]] | None = None,
) -> Insert:
    """INSERT ``rows`` (dicts with the same keys) into ``table``; ``same`` gives columns one SQL
    expression for every row (the database clock, say)."""
    names = list(rows[0])
    arrays = [
        bindparam(f"rows_{name}", [row[name] for row in rows], type_=ARRAY(table.c[name].type))
        for name in names
    ]
    each = func.unnest(*arrays).table_valued(*names).render_derived(name="each")
    constant = dict(same or {})
    selected = select(*(each.c[name] for name in names), *constant.values())
    return pg_insert(table).from_select([*names, *constant], selected)
