"""Property-based, over the running stack: the propose endpoint answers any JSON body with a
client error or a proposal — never a 5xx — and every proposal it stores is inside the caller's
organization with the amount the database proves.
"""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
import pytest_asyncio
from e2e_stack import Stack
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from signoff_runtime.registry import load_operations
from sqlalchemy import text

pytestmark = pytest.mark.e2e

KINDS = sorted(op.kind for op in load_operations())
FIELDS = sorted({name for op in load_operations() for name in op.Request.model_fields})
OWED_CENTS = 3500  # the seeded refund case: 10 % of 34 999, half up


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(stack: Stack) -> dict[str, Any]:
    home, other = (await stack.seed())["organizations"]
    return {"home": home, "other": other, "token": stack.token(home["users"]["manager"], home)}


def _json() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
        ),
        max_leaves=10,
    )


def _ids(org: dict[str, Any]) -> list[str]:
    return [
        *org["refund_case"].values(),
        org["broadcast_case"]["broadcast_id"],
        *org["broadcast_case"]["segment_ids"],
    ]


def _bodies(world: dict[str, Any]) -> st.SearchStrategy[Any]:
    ids = st.sampled_from(_ids(world["home"]) + _ids(world["other"]))
    value = st.one_of(
        ids,
        st.lists(ids, min_size=1, max_size=3),
        st.sampled_from(["original_payment_method", "account_credit"]),
        _json(),
    )
    request = st.dictionaries(
        st.sampled_from([*FIELDS, "amount_cents", "organization_id"]), value, max_size=6
    )
    case = world["home"]["refund_case"]
    honest = {k: case[k] for k in ("payment_id", "line_item_id", "discount_id")}
    honest["destination"] = "original_payment_method"
    near = st.sampled_from([None, *honest, "amount_cents", "organization_id"]).flatmap(
        lambda key: st.just(honest) if key is None else value.map(lambda v: {**honest, key: v})
    )
    # the order's own refund with at most one field swapped or added: now and then a proposal
    targeted = st.tuples(
        st.just("order.refund_missing_discount"),
        st.fixed_dictionaries({"resource_id": st.just(case["order_id"]) | ids, "request": near}),
    )
    shaped = st.fixed_dictionaries(
        {"resource_id": ids | st.text(max_size=20), "request": near | request | _json()},
        optional={"organization_id": ids, "amount_cents": st.integers()},
    )
    kinds = st.sampled_from(KINDS) | st.text(string.ascii_lowercase + "._", max_size=30)
    return targeted | st.tuples(kinds, shaped | _json())


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_any_json_body_is_answered_without_a_5xx_and_stores_nothing_outside_the_evidence(
    stack: Stack, world: dict[str, Any], data: st.DataObject
) -> None:
    home, other = world["home"], world["other"]
    kind, body = data.draw(_bodies(world))
    response = await stack.http.post(
        f"{stack.url('agent')}/v1/operations/{kind or 'x'}/propose",
        content=json.dumps(body).encode(),
        headers={**stack.auth(world["token"]), "Content-Type": "application/json"},
    )
    event(str(response.status_code))
    assert response.status_code < 500, response.text
    assert response.headers["content-type"].startswith(("application/json", "application/problem"))
    if response.status_code == 201:
        proposal = response.json()["proposal"]
        assert proposal["organization_id"] == home["id"]
    async with stack.engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT organization_id, operation_kind, arguments FROM proposals.proposals "
                    "WHERE organization_id = ANY(:orgs)"
                ),
                {"orgs": [home["id"], other["id"]]},
            )
        ).all()
    home_ids = set(_ids(home))
    for org_id, operation_kind, arguments in rows:
        assert org_id == home["id"]
        refs = {v for k, v in arguments.items() if k.endswith("_id")}
        refs |= {s for k, v in arguments.items() if k.endswith("_ids") for s in v}
        assert refs <= home_ids, refs - home_ids
        if operation_kind == "order.refund_missing_discount":
            assert arguments["amount_cents"] == OWED_CENTS
