"""``policy_facts``: the preview fields an approval policy may test, checked at load."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict
from signoff_contracts.operations import (
    Actor,
    ExecutionContext,
    Locale,
    LocalOperation,
    OperationDefinitionError,
    RenderedPreview,
    Resolved,
    Scope,
    check_operation,
)
from signoff_contracts.reasons import Reason


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    n: int


class _Shown(BaseModel):
    model_config = ConfigDict(frozen=True)
    n: int
    label: str
    tags: list[str] = []


class _Facts(LocalOperation[_Strict, _Strict, _Shown, _Strict]):
    kind = "thing.count"
    version = 1
    section = "things"
    resource = "thing"
    summary = "Count a thing."
    Request = _Strict
    Arguments = _Strict
    Preview = _Shown
    Result = _Strict
    policy_facts: ClassVar[tuple[str, ...]] = ("n", "label")

    async def resolve(self, request: _Strict, scope: Scope, conn: Any) -> Resolved[_Strict, _Shown]:
        return Resolved(request, _Shown(n=request.n, label="x"))

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return True

    async def revalidate(self, arguments: _Strict, scope: Scope, conn: Any) -> Reason | None:
        return None

    async def execute(
        self, arguments: _Strict, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> _Strict:
        return arguments

    def render_preview(self, preview: _Shown, locale: Locale) -> RenderedPreview:
        return RenderedPreview(title=f"Count {preview.n}")

    def render_result(self, result: _Strict, locale: Locale) -> str:
        return f"Counted {result.n}."


def test_declared_facts_are_typed_preview_fields_read_from_a_stored_preview() -> None:
    check_operation(_Facts)
    assert _Facts.fact_types() == {"n": int, "label": str}
    assert _Facts().facts({"n": 15000, "label": "x", "tags": []}) == {"n": 15000, "label": "x"}


@pytest.mark.parametrize("facts", [("missing",), ("tags",)], ids=["not_a_field", "not_a_scalar"])
def test_a_fact_that_is_no_scalar_preview_field_fails_at_load(facts: tuple[str, ...]) -> None:
    broken = type("Broken", (_Facts,), {"policy_facts": facts})
    with pytest.raises(OperationDefinitionError, match="policy fact"):
        check_operation(broken)
