"""Property-based: whatever a model (or anyone) sends as an operation's request, the operation
either refuses it or resolves arguments inside the scope's organization, with the amount the
database proves — never another tenant's ids, never an amount taken from the request.

Every loaded operation is driven with arbitrary JSON and with requests mixing ids of the
scope's organization, ids of another organization, random strings, wrong types and extra keys
a model might try (``amount_cents``, ``organization_id``); the oracle re-reads the database.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from signoff_club.seed import seed_demo
from signoff_contracts.operations import Rejected, Scope
from signoff_runtime.registry import load_operations
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration

OPERATIONS = {op.kind: op for op in load_operations()}
EXAMPLES = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_ID = re.compile(r"^[a-z]{3}_[0-9A-Za-z]+$")
_TABLES = ("participants", "products", "discounts", "orders", "segments", "broadcast_forms")


async def _ids_of(engine: AsyncEngine, org_id: str) -> set[str]:
    """Every record id of one organization, straight from the club's tables."""
    union = " UNION ALL ".join(
        f"SELECT id FROM club.{t} WHERE organization_id = :o" for t in _TABLES
    )
    union += (
        " UNION ALL SELECT li.id FROM club.line_items li JOIN club.orders o ON o.id = li.order_id"
        " WHERE o.organization_id = :o"
        " UNION ALL SELECT p.id FROM club.payments p JOIN club.orders o ON o.id = p.order_id"
        " WHERE o.organization_id = :o"
    )
    async with engine.connect() as conn:
        return {row[0] for row in await conn.execute(text(union), {"o": org_id})}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(engine: AsyncEngine) -> dict[str, Any]:
    async with engine.begin() as conn:
        home, other = (await seed_demo(conn))["organizations"]
    return {
        "home": home,
        "other": other,
        "home_ids": await _ids_of(engine, home["id"]),
        "other_ids": await _ids_of(engine, other["id"]),
    }


def _json() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=12,
    )


def _requests(op: Any, world: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Arbitrary JSON, or the Request's own fields filled with mixed ids, wrong types and
    strings, plus extra keys a model might add."""
    ids = st.sampled_from(sorted(world["home_ids"] | world["other_ids"]))
    value = st.one_of(
        ids,
        ids,
        st.lists(ids, min_size=1, max_size=3),
        st.sampled_from(["original_payment_method", "account_credit", "card_refund"]),
        st.text(max_size=40),
        _json(),
    )
    fields = sorted(op.Request.model_fields)
    honest = _honest(op.kind, world["home"])
    extras = {
        "amount_cents": st.integers() | _json(),
        "organization_id": st.sampled_from([world["other"]["id"], world["home"]["id"]]),
        "account": st.text(max_size=10),
    }
    shaped = st.fixed_dictionaries({name: value for name in fields}, optional=extras)
    # the honest request with some fields swapped: close enough to resolve now and then
    near = st.sampled_from([None, *fields]).flatmap(
        lambda name: st.just(honest) if name is None else value.map(lambda v: {**honest, name: v})
    )
    return st.one_of(near, near, shaped, _json())


def _honest(kind: str, home: dict[str, Any]) -> dict[str, Any]:
    if kind == "order.refund_missing_discount":
        case = home["refund_case"]
        return {
            **{k: case[k] for k in ("payment_id", "line_item_id", "discount_id")},
            "destination": "original_payment_method",
        }
    return {"segment_ids": home["broadcast_case"]["segment_ids"], "subject": "s", "body": "b"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


async def _refund_owed(engine: AsyncEngine, arguments: dict[str, Any]) -> int:
    """The discount's worth on its line, recomputed here from the rows (half up to the cent,
    capped at what the line costs), as the operation's docstring states the rule."""
    sql = (
        "SELECT li.quantity, li.unit_price_cents, li.amount_cents, d.kind, d.value"
        " FROM club.line_items li JOIN club.line_item_discounts lid ON lid.line_item_id = li.id"
        " JOIN club.discounts d ON d.id = lid.discount_id"
        " WHERE li.id = :line AND d.id = :discount AND NOT lid.applied"
    )
    params = {"line": arguments["line_item_id"], "discount": arguments["discount_id"]}
    async with engine.connect() as conn:
        quantity, unit, line, kind, value = (await conn.execute(text(sql), params)).one()
    if kind == "percentage":
        worth = Decimal(quantity * unit * value) / Decimal(10_000)
        owed = int(worth.quantize(Decimal(1), rounding=ROUND_HALF_UP))
    else:
        owed = value
    return max(0, min(owed, line))


async def _audience(engine: AsyncEngine, org_id: str, segment_ids: list[str]) -> int:
    sql = (
        "SELECT count(DISTINCT m.participant_id) FROM club.segment_members m"
        " JOIN club.segments s ON s.id = m.segment_id"
        " WHERE s.organization_id = :o AND s.id = ANY(:ids)"
    )
    async with engine.connect() as conn:
        return int((await conn.execute(text(sql), {"o": org_id, "ids": segment_ids})).scalar_one())


def _scope(op: Any, home: dict[str, Any]) -> Scope:
    resource = (
        home["refund_case"]["order_id"]
        if op.resource == "order"
        else home["broadcast_case"]["broadcast_id"]
    )
    return Scope(organization_id=home["id"], section=op.section, resource_id=resource)


async def _check(op: Any, data: Any, world: dict[str, Any], engine: AsyncEngine) -> str:
    """One request through ``parse_request`` and ``resolve``; the property; what happened."""
    home = world["home"]
    try:
        request = op.parse_request(data)
    except ValidationError:
        return "invalid"
    async with engine.connect() as conn:
        try:
            resolved = await op.resolve(request, _scope(op, home), conn)
        except Rejected:
            return "rejected"
    arguments = resolved.arguments.model_dump(mode="json")
    # references are the ``*_id``/``*_ids`` fields (free text like a subject may say anything)
    refs = [v for k, v in arguments.items() if k.endswith(("_id", "_ids"))]
    referenced = set(_strings(refs))
    assert refs and all(_ID.match(s) for s in referenced), arguments
    assert referenced <= world["home_ids"], referenced - world["home_ids"]
    assert not referenced & world["other_ids"]
    if op.kind == "order.refund_missing_discount":
        assert arguments["order_id"] == home["refund_case"]["order_id"]
        assert arguments["amount_cents"] == await _refund_owed(engine, arguments)
        assert resolved.preview.amount_cents == arguments["amount_cents"]
    if op.kind == "email_broadcast.apply_draft":
        assert arguments["broadcast_id"] == home["broadcast_case"]["broadcast_id"]
        audience = await _audience(engine, home["id"], list(arguments["segment_ids"]))
        assert arguments["audience_count"] == audience == resolved.preview.audience_count
    return "resolved"


def test_every_loaded_operation_is_covered() -> None:
    assert set(OPERATIONS) >= {"order.refund_missing_discount", "email_broadcast.apply_draft"}
    assert all(op.resource in ("order", "broadcast") for op in OPERATIONS.values()), (
        "a new resource kind needs a scope in _scope"
    )


@pytest.mark.parametrize("kind", sorted(OPERATIONS))
@EXAMPLES
@given(data=st.data())
async def test_any_request_is_refused_or_resolves_inside_the_scope_with_the_computed_amount(
    kind: str, world: dict[str, Any], engine: AsyncEngine, data: st.DataObject
) -> None:
    op = OPERATIONS[kind]
    outcome = await _check(op, data.draw(_requests(op, world)), world, engine)
    event(outcome)


@pytest.mark.parametrize("kind", sorted(OPERATIONS))
async def test_the_seeded_case_resolves_and_extra_keys_never_pass(
    kind: str, world: dict[str, Any], engine: AsyncEngine
) -> None:
    """The honest request resolves (so the property above is not vacuous); the same request
    with an amount or a tenant added is invalid."""
    honest = _honest(kind, world["home"])
    op = OPERATIONS[kind]
    assert await _check(op, honest, world, engine) == "resolved"
    for extra in ({"amount_cents": 1}, {"organization_id": world["other"]["id"]}):
        assert await _check(op, {**honest, **extra}, world, engine) == "invalid"
