"""``render_result`` is a part like the others: an operation without one fails at load."""

from __future__ import annotations

from typing import Any

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


class _Done(BaseModel):
    model_config = ConfigDict(frozen=True)
    n: int


class _Without(LocalOperation[_Strict, _Strict, _Strict, _Done]):
    kind = "thing.count"
    version = 1
    section = "things"
    resource = "thing"
    summary = "Count a thing."
    Request = _Strict
    Arguments = _Strict
    Preview = _Strict
    Result = _Done

    async def resolve(
        self, request: _Strict, scope: Scope, conn: Any
    ) -> Resolved[_Strict, _Strict]:
        return Resolved(request, request)

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return True

    async def revalidate(self, arguments: _Strict, scope: Scope, conn: Any) -> Reason | None:
        return None

    async def execute(
        self, arguments: _Strict, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> _Done:
        return _Done(n=arguments.n)

    def render_preview(self, preview: _Strict, locale: Locale) -> RenderedPreview:
        return RenderedPreview(title=f"Count {preview.n}")


class _With(_Without):
    def render_result(self, result: _Done, locale: Locale) -> str:
        return {"en": "Counted {n}.", "fr": "{n} comptés."}[locale].format(n=result.n)


def test_an_operation_without_render_result_fails_at_load() -> None:
    with pytest.raises(OperationDefinitionError, match="render_result"):
        check_operation(_Without)


def test_render_result_reads_the_stored_result() -> None:
    check_operation(_With)
    op = _With()
    assert op.render_result(op.parse_result({"n": 3}), "fr") == "3 comptés."
