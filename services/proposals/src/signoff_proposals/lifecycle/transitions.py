"""The one way a proposal's status changes: ``transition``, and its set-based forms.

Both start from the lifecycle table's move (``domain.step``): a move the table does not have
raises ``IllegalTransition`` before anything is written. Everything else comes from that move:

- ONE conditional UPDATE — ``… SET status = :target WHERE id = :id AND status = :source
  [AND expires_at > statement_timestamp()] RETURNING *`` (the step's ``clock``: a person's move
  out of ``pending`` needs it unexpired, expiry needs it lapsed). Under READ COMMITTED
  PostgreSQL re-checks that WHERE clause on the newest row version, so of any number of
  concurrent callers exactly one matches; the others get ``None`` and answer from the row as it
  is now. This is what makes a claim exactly-once.
- then ONE statement (``outbox.enqueue``) with the audit row (the step's ``action``), the signed
  execution contract for a claim, and the ``proposal.<event>`` (the step's ``event``).

``expire`` is the same move for many rows in one UPDATE (the lapsed pending rows the sweep takes,
skipping those other transactions hold, or the one row a decision found lapsed) and one
statement of their audit rows and events. ``create`` stores a new proposal with the table's
``CREATION`` step. Nothing else in the service writes ``proposals.status``.

``transition_each`` is ``transition`` for many proposals at once, each with its own move, values,
actor and detail (a batch of outcomes): one UPDATE joined to the moves' arrays, one statement of
their audit rows and messages.

Every claim runs ``transition`` and every outcome ``transition_each``, so their UPDATEs are fixed
SQL per shape of call run by asyncpg (``signoff_runtime.hot``; docs/benchmarks.md, "Hot
statements"), their rows read by attribute (``hot.Fields``) like the ``Row``\\ s of the
others; a column set to the clock plus an interval is given as ``repository.Later``. ``expire``
and ``create`` stay SQLAlchemy Core.

Over 300 lines because every statement that writes a status lives here and nowhere else (the
unit test ``test_one_way_to_move`` allows this module only): splitting it would spread them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from signoff_contracts.status import ProposalStatus
from signoff_runtime import hot, tracing
from signoff_runtime.outbox import Outgoing
from signoff_runtime.unit_of_work import UnitOfWork
from sqlalchemy import JSON, ClauseElement, ColumnElement, Row, update
from sqlalchemy.dialects import postgresql

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain, outbox
from signoff_proposals.lifecycle import metrics as lifecycle_metrics
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.domain import Step
from signoff_proposals.lifecycle.repository import DB_CLOCK, AuditEntry, Later, Stored
from signoff_proposals.metrics import count_transition
from signoff_proposals.tables import proposals

PENDING, EXPIRED = ProposalStatus.PENDING, ProposalStatus.EXPIRED


async def transition(
    ctx: Context,
    tx: UnitOfWork,
    proposal_id: str,
    *,
    source: ProposalStatus,
    target: ProposalStatus,
    actor: str,
    values: dict[str, Any] | None = None,
    detail: dict[str, Any] | None = None,
    causation_id: str | None = None,
    organization_id: str | None = None,
    any_status: bool = False,
) -> hot.Fields | None:
    """Move ``proposal_id`` from ``source`` to ``target`` (also setting ``values``: each a value,
    ``DB_CLOCK`` or ``Later``), audited under ``actor`` with ``detail`` and announced; ``None``
    if the row did not qualify. Its UPDATE is fixed SQL per shape of call run by asyncpg
    (``_one_sql``, ``signoff_runtime.hot``): every claim runs it.

    ``any_status`` is the negative control ``SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS`` (tests only):
    the status condition is dropped, and with it the table's promise.
    """
    move = domain.step(source, target)
    given = values or {}
    shape = tuple((name, _kind(value)) for name, value in given.items())
    sql, params = _one_sql(
        shape, move.clock, any_status, organization_id is not None, move.sends_contract
    )
    args: list[Any] = [proposal_id, move.target.value]
    if not any_status:
        args.append(source.value)
    if organization_id is not None:
        args.append(organization_id)
    args += [param(given[name]) for name, param in params]
    record = await hot.fetchrow(tx.conn, sql, *args)
    rows = [] if record is None else [hot.Fields(record)]
    for row in rows:
        _count(tx, row, move.target)
    await _record(ctx, tx, move, rows, actor, detail or {}, causation_id)
    return rows[0] if rows else None


@dataclass(frozen=True, slots=True)
class Move:
    """One proposal's move for ``transition_each``: ``transition``'s arguments for one row.
    ``values`` is the new column values, each a value for this row or ``DB_CLOCK``."""

    proposal_id: str
    source: ProposalStatus
    target: ProposalStatus
    actor: str
    values: Mapping[str, Any] = field(default_factory=dict)
    detail: Mapping[str, Any] = field(default_factory=dict)
    causation_id: str | None = None


async def transition_each(
    ctx: Context, tx: UnitOfWork, moves: Sequence[Move]
) -> list[hot.Fields | None]:
    """Each move as ``transition`` makes it, all in one UPDATE and one statement of audit rows
    and messages; the moved row for each move, ``None`` if its row did not qualify. Moves of one
    proposal apply in the order given (one round of statements per move after its first). Every
    move must set the same ``values`` columns, and none may carry a clock condition (moves out of
    ``pending`` go through ``transition``)."""
    moved: list[hot.Fields | None] = [None] * len(moves)
    rounds: list[list[int]] = []
    seen: dict[str, int] = {}
    for i, each in enumerate(moves):
        turn = seen.get(each.proposal_id, 0)
        seen[each.proposal_id] = turn + 1
        if turn == len(rounds):
            rounds.append([])
        rounds[turn].append(i)
    for round_ in rounds:
        steps = {i: domain.step(moves[i].source, moves[i].target) for i in round_}
        if any(step.clock is not None for step in steps.values()):
            raise ValueError("a move with a clock condition goes through transition()")
        rows = {row.id: row for row in await _update_each(tx, [moves[i] for i in round_], steps)}
        for i in round_:
            moved[i] = rows.get(moves[i].proposal_id)
        await _record_each(
            ctx,
            tx,
            [
                (steps[i], row, moves[i].actor, dict(moves[i].detail), moves[i].causation_id)
                for i in round_
                if (row := moved[i]) is not None
            ],
        )
    return moved


async def expire(
    ctx: Context, tx: UnitOfWork, *, noticed_by: str, proposal_id: str | None = None, batch: int = 1
) -> Sequence[Row[Any]]:
    """``pending → expired`` for lapsed proposals: ``proposal_id`` only, or the ``batch`` that
    lapsed first (rows held by other transactions are skipped, so replicas share the sweep)."""
    move = domain.step(PENDING, EXPIRED)
    taken = repo.lapsed(proposals, batch=batch, row_id=proposal_id)
    rows = await _update(tx, move, [proposals.c.id == taken.c.id], {})
    await _record(ctx, tx, move, rows, domain.SYSTEM_ACTOR, {"noticed_by": noticed_by}, None)
    return rows


async def create(
    ctx: Context,
    tx: UnitOfWork,
    new: repo.NewProposal,
    ttl: timedelta,
    *,
    detail: dict[str, Any],
    causation_id: str,
) -> repo.Stored | None:
    """Store ``new`` as ``pending``, audited ``created`` (with the proposing turn's trace) and
    announced; ``None`` if a proposal with its id exists."""
    row = await repo.insert_proposal(tx, new, ttl)
    if row is None:
        return None
    trail = {**detail, **tracing.headers()}
    await _record(ctx, tx, domain.CREATION, [row], new.requested_by, trail, causation_id)
    return row


def _clock(move: Step) -> list[ColumnElement[bool]]:
    """The move's condition on ``expires_at``, by the database clock (none for most moves)."""
    if move.clock == "unexpired":
        return [proposals.c.expires_at > DB_CLOCK]
    if move.clock == "lapsed":
        return [proposals.c.expires_at <= DB_CLOCK]
    return []


async def _update(
    tx: UnitOfWork, move: Step, where: list[ColumnElement[bool]], values: dict[str, Any]
) -> Sequence[Row[Any]]:
    """The move's one conditional UPDATE through SQLAlchemy (``expire``: its rows picked by a
    CTE); the rows it moved (counted once committed)."""
    assert move.source is not None
    returning: list[Any] = list(proposals.c)
    if move.sends_contract:
        returning.append(repo.origin_trace())
    stmt = (
        update(proposals)
        .where(*where, proposals.c.status == move.source.value, *_clock(move))
        .values(status=move.target.value, **values)
        .returning(*returning)
    )
    rows = (await tx.conn.execute(stmt)).all()
    for row in rows:
        _count(tx, row, move.target)
    return rows


def _kind(value: Any) -> str:
    """How ``transition``'s SQL sets a column to ``value``: the database clock, the clock plus a
    parameter's interval (``Later``), or a parameter."""
    if value is DB_CLOCK:
        return "clock"
    if isinstance(value, Later):
        return "later"
    assert not isinstance(value, ClauseElement), "a value, DB_CLOCK or Later"
    return "value"


#: a move's condition on ``expires_at`` (``domain.Step.clock``) in ``transition``'s SQL
_CLOCK_SQL = {
    None: "",
    "unexpired": " AND p.expires_at > statement_timestamp()",
    "lapsed": " AND p.expires_at <= statement_timestamp()",
}


@functools.cache
def _one_sql(
    shape: tuple[tuple[str, str], ...],
    clock: str | None,
    any_status: bool,
    in_org: bool,
    sends_contract: bool,
) -> tuple[str, tuple[tuple[str, Callable[[Any], Any]], ...]]:
    """``transition``'s UPDATE for one shape of call — each given column and how it is set
    (``_kind``), the move's clock condition, the status and organization conditions or not, the
    contract's trace returned or not — and, after its fixed parameters (``$1`` the id, ``$2``
    the target, then the source and the organization if conditioned on), each parameter's
    column and conversion (``jsonb``: JSON text; ``Later``: its interval). Built once per
    shape, as ``_each_sql``."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy's, untyped
    unknown = {name for name, _ in shape} - set(proposals.c.keys())
    assert not unknown, f"not columns of proposals: {unknown}"
    fixed = ["p.id = $1"] + (["p.status = $3"] if not any_status else [])
    if in_org:
        fixed.append(f"p.organization_id = ${len(fixed) + 2}")
    sets = ["status = $2"]
    params: list[tuple[str, Callable[[Any], Any]]] = []
    for name, kind in shape:
        n = len(fixed) + 2 + len(params)
        type_ = proposals.c[name].type
        if kind == "clock":
            sets.append(f"{name} = statement_timestamp()")
        elif kind == "later":
            sets.append(f"{name} = statement_timestamp() + ${n}::interval")
            params.append((name, _interval))
        else:
            sets.append(f"{name} = ${n}::{type_.compile(dialect=dialect)}")
            params.append((name, hot.json_param if isinstance(type_, JSON) else _as_is))
    returning = repo.COLUMNS + (", " + _ORIGIN_TRACE if sends_contract else "")
    sql = (
        f"UPDATE proposals.proposals AS p SET {', '.join(sets)} "  # noqa: S608 - table's names
        f"WHERE {' AND '.join(fixed)}{_CLOCK_SQL[clock]} RETURNING {returning}"
    )
    return sql, tuple(params)


def _interval(value: Later) -> timedelta:
    return value.by


async def _update_each(
    tx: UnitOfWork, moves: Sequence[Move], steps: Mapping[int, Step]
) -> list[hot.Fields]:
    """``_update`` for moves of distinct proposals, each with its own source, target and values:
    one UPDATE joined to the moves as arrays (``unnest``), so its text is the same for any
    number of moves — fixed SQL per shape (``_each_sql``), run by asyncpg
    (``signoff_runtime.hot``): every outcome runs it. The rows it moved, read by attribute like
    ``Row``\\ s (counted once committed)."""
    names = sorted({name for each in moves for name in each.values})
    assert all(set(each.values) == set(names) for each in moves), "one set of columns"
    same = tuple(n for n in names if moves[0].values[n] is DB_CLOCK)
    each_row = tuple(n for n in names if n not in same)
    sends_contract = any(step.sends_contract for step in steps.values())
    sql, params = _each_sql(each_row, same, sends_contract)
    arrays = [
        [param(m.values[n]) for m in moves] for n, param in zip(each_row, params, strict=True)
    ]
    records = await hot.fetch(
        tx.conn,
        sql,
        [m.proposal_id for m in moves],
        [m.source.value for m in moves],
        [m.target.value for m in moves],
        *arrays,
    )
    rows = [hot.Fields(record) for record in records]
    for row in rows:
        _count(tx, row, ProposalStatus(row.status))
    return rows


#: the contract's trace, as the UPDATEs of ``_one_sql`` and ``_each_sql`` return it
_ORIGIN_TRACE = (
    "(SELECT a.detail ->> 'traceparent' FROM proposals.audit a "
    "WHERE a.proposal_id = p.id AND a.action = 'created' LIMIT 1) AS origin_trace"
)


def _as_is(value: Any) -> Any:
    return value


@functools.cache
def _each_sql(
    each_row: tuple[str, ...], same: tuple[str, ...], sends_contract: bool
) -> tuple[str, tuple[Callable[[Any], Any], ...]]:
    """``_update_each``'s UPDATE for one shape of move — the columns given per row
    (``each_row``, ``$4``… as arrays), those set to the database clock (``same``), the contract's
    trace returned or not — and each ``each_row`` column's parameter conversion (``jsonb``:
    JSON text, as the connection's codec wants it). Built once per shape: what SQLAlchemy
    rebuilt, compiled and keyed on every call (``repository.origin_trace`` is the same
    subquery)."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy's, untyped
    unknown = {*each_row, *same} - set(proposals.c.keys())
    assert not unknown, f"not columns of proposals: {unknown}"
    types = [proposals.c[n].type for n in each_row]
    arrays = ["$1::text[]", "$2::text[]", "$3::text[]"] + [
        f"${i}::{type_.compile(dialect=dialect)}[]" for i, type_ in enumerate(types, start=4)
    ]
    sets = [
        "status = m.target",
        *(f"{n} = m.{n}" for n in each_row),
        *(f"{n} = statement_timestamp()" for n in same),
    ]
    returning = repo.COLUMNS + (", " + _ORIGIN_TRACE if sends_contract else "")
    given = ", ".join(("id", "source", "target", *each_row))
    sql = (
        f"UPDATE proposals.proposals AS p SET {', '.join(sets)} "  # noqa: S608 - table's names
        f"FROM unnest({', '.join(arrays)}) AS m({given}) "
        f"WHERE p.id = m.id AND p.status = m.source RETURNING {returning}"
    )
    params = tuple(hot.json_param if isinstance(t, JSON) else _as_is for t in types)
    return sql, params


def _count(tx: UnitOfWork, row: Stored, target: ProposalStatus) -> None:
    """Count the move of ``row`` into ``target``, and observe its latency, once committed."""
    count_transition(tx, row.operation_kind, target)
    observed = lifecycle_metrics.latency(row, target)
    if observed is not None:
        histogram, labels, seconds = observed
        tx.after_commit(partial(_observe, histogram, labels, seconds))


def _observe(histogram: Any, labels: dict[str, str], seconds: float) -> None:
    histogram.labels(**labels).observe(seconds)


async def _record(
    ctx: Context,
    tx: UnitOfWork,
    move: Step,
    rows: Sequence[Stored],
    actor: str,
    detail: dict[str, Any],
    causation_id: str | None,
) -> None:
    """The moved rows' audit rows and messages, derived from the move: one statement."""
    await _record_each(ctx, tx, [(move, row, actor, detail, causation_id) for row in rows])


async def _record_each(
    ctx: Context,
    tx: UnitOfWork,
    moved: Sequence[tuple[Step, Stored, str, dict[str, Any], str | None]],
) -> None:
    """Each moved row's audit row and messages, derived from its move: one statement."""
    if not moved:
        return
    entries: list[AuditEntry] = []
    messages: list[Outgoing] = []
    for move, row, actor, detail, causation_id in moved:
        noted = dict(detail)
        if move.sends_contract:
            signed, message = outbox.contract(ctx, row)
            messages.append(message)
            noted.update(contract_id=signed.contract_id, execute_by=signed.execute_by.isoformat())
            if signed.approvers:  # an approval policy needed more than one person
                noted["approvers"] = list(signed.approvers)
        entries.append(AuditEntry(row.id, actor, move.action, move.source, move.target, noted))
        messages.append(outbox.event(ctx, move.event, row, causation_id))
    await outbox.enqueue(ctx, tx, messages, audit=entries)
