"""Property-based: whatever a model (or anyone) sends as the request, ``resolve`` either refuses
it or resolves arguments that reference only the scope's organization — never a record named by
the case's out-of-scope requests — and stores nothing.

Requests are arbitrary JSON, the ``Request``'s own fields filled with the case's ids (ours and
another organization's), other strings, wrong types and extra keys a model might try
(``amount_cents``, ``organization_id``), and the valid request with one field swapped. An
operation adds what it can prove from its rows (an amount recomputed, an audience recounted) by
overriding ``check_resolved``.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from signoff_contracts.operations import AnyOperation, Rejected, Resolved

from signoff_conformance.case import ConformanceCase
from signoff_conformance.driver import resolve_request

ID = re.compile(r"^[a-z]{3}_[0-9A-Za-z]+$")
#: examples per operation (``SIGNOFF_CONFORMANCE_EXAMPLES`` overrides: the kit's self-test runs
#: thirteen toy variants and asks for fewer)
EXAMPLES = settings(
    max_examples=int(os.environ.get("SIGNOFF_CONFORMANCE_EXAMPLES", "50")),
    deadline=None,
    derandomize=True,  # the same examples on every run: a failure reproduces
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        # one method, inherited by every operation's test class
        HealthCheck.differing_executors,
    ],
)


class RequestProperties:
    """Mixed into ``OperationConformance``."""

    #: extra keys a model might add to get past the preview: each makes the request invalid
    smuggled: ClassVar[dict[str, Any]] = {"amount_cents": 1, "organization_id": "org_elsewhere"}

    async def check_resolved(self, case: ConformanceCase, resolved: Resolved[Any, Any]) -> None:
        """Override to check what only your rows can prove about a resolved request."""

    @EXAMPLES
    @given(data=st.data())
    async def test_any_request_is_refused_or_resolves_inside_the_scope(
        self, op: AnyOperation, case: ConformanceCase, data: st.DataObject
    ) -> None:
        before = await case.count_effects()
        said = await self._try(op, case, data.draw(requests(op, case)))
        event(said)
        assert await case.count_effects() == before, "resolving stored an effect"

    async def test_no_field_can_name_another_organizations_record(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        """The search above, made certain where it matters most: each of the case's foreign ids
        in each field of the valid request (alone, or as a one-item list)."""
        for field in case.valid_request:
            for foreign in sorted(foreign_ids(case)):
                for value in (foreign, [foreign]):
                    await self._try(op, case, {**case.valid_request, field: value})

    async def test_the_valid_request_resolves_and_smuggled_keys_never_pass(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        """The property above is not vacuous: the valid request resolves under it."""
        assert await self._try(op, case, case.valid_request) == "resolved"
        for key, value in self.smuggled.items():
            said = await self._try(op, case, {**case.valid_request, key: value})
            assert said == "invalid", f"a request with `{key}` was {said}"

    async def _try(self, op: AnyOperation, case: ConformanceCase, request: Any) -> str:
        try:
            resolved = await resolve_request(op, case, request)
        except ValidationError:
            return "invalid"
        except Rejected:
            return "rejected"
        arguments = resolved.arguments.model_dump(mode="json")
        referenced = set(_strings([v for k, v in arguments.items() if k.endswith(("_id", "_ids"))]))
        assert all(ID.match(s) for s in referenced), f"not an id in {arguments}"
        leaked = referenced & foreign_ids(case)
        assert not leaked, f"resolved another organization's records {sorted(leaked)}"
        await self.check_resolved(case, resolved)
        return "resolved"


def own_ids(case: ConformanceCase) -> set[str]:
    return {s for s in _strings(case.valid_request) if ID.match(s)} | {case.scope.resource_id}


def foreign_ids(case: ConformanceCase) -> set[str]:
    """Ids the out-of-scope requests name that the valid request does not: other
    organizations' records (or none at all)."""
    named = {s for r in case.out_of_scope_requests.values() for s in _strings(r) if ID.match(s)}
    return named - own_ids(case)


def requests(op: AnyOperation, case: ConformanceCase) -> st.SearchStrategy[Any]:
    ids = st.sampled_from(sorted(own_ids(case) | foreign_ids(case)))
    words = sorted({s for s in _strings(case.valid_request) if not ID.match(s)}) or ["x"]
    value = st.one_of(
        ids,
        ids,
        st.lists(ids, min_size=1, max_size=3),
        st.sampled_from(words),
        st.text(max_size=40),
        _json(),
    )
    fields = sorted(op.Request.model_fields)
    extras = {
        "amount_cents": st.integers() | _json(),
        "organization_id": st.text(max_size=12),
        "account": st.text(max_size=10),
    }
    shaped = st.fixed_dictionaries({name: value for name in fields}, optional=extras)
    honest = case.valid_request
    near = st.sampled_from([None, *fields]).flatmap(
        lambda name: st.just(honest) if name is None else value.map(lambda v: {**honest, name: v})
    )
    return st.one_of(near, near, shaped, _json())


def _json() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=12,
    )


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []
