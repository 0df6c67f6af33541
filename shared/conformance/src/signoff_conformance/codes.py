"""Checks of an operation's reason codes: each refusal for its own reason, and in every locale.

A reason code reaches people as the operation's own sentence (``Operation.reasons``, rendered in
the reader's locale), so a code without a text in some locale is a message someone cannot read.
The codes are found three ways — the ones the case's refusals and stale facts produce, the ones
the test class expects, and the ones the operation's source names — so a code added in a helper
module is not missed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from typing import Any, ClassVar

import pytest
from signoff_contracts.operations import LOCALES, AnyOperation, Operation, Rejected

from signoff_conformance.case import ConformanceCase
from signoff_conformance.driver import resolve_request, stored

_CODE = re.compile(r'(?:Rejected\(|code=)\s*"([a-z][a-z0-9_]*)"')


class ReasonCodeChecks:
    """Mixed into ``OperationConformance``."""

    #: out-of-scope request name → the code ``resolve`` must reject it with
    out_of_scope_codes: ClassVar[dict[str, str] | None] = None
    #: stale fact name → the code ``revalidate`` must return after it
    stale_codes: ClassVar[dict[str, str] | None] = None

    async def test_each_out_of_scope_request_is_rejected_for_its_own_reason(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        if self.out_of_scope_codes is None:
            pytest.skip("declare out_of_scope_codes (request name → reason code) to check it")
        assert await rejection_codes(op, case) == self.out_of_scope_codes

    async def test_each_stale_fact_fails_for_its_own_reason(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        if self.stale_codes is None:
            pytest.skip("declare stale_codes (stale fact name → reason code) to check it")
        assert await stale_codes(op, case) == self.stale_codes

    async def test_every_reason_code_has_a_text_in_every_locale(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        untranslated = {
            code: sorted(set(LOCALES) - {k for k, v in texts.items() if str(v).strip()})
            for code, texts in op.reasons.items()
        }
        untranslated = {code: missing for code, missing in untranslated.items() if missing}
        assert not untranslated, f"reason texts missing in locales: {untranslated}"
        seen = {code for code in (await rejection_codes(op, case)).values() if code}
        seen |= {code for code in (await stale_codes(op, case)).values() if code}
        seen |= set((self.out_of_scope_codes or {}).values())
        seen |= set((self.stale_codes or {}).values())
        seen |= codes_in_source(type(op))
        without = sorted(seen - set(op.reasons))
        assert not without, (
            f"reason codes without a text in `{type(op).__name__}.reasons`: {without} "
            f"(give each a sentence per locale: {', '.join(LOCALES)})"
        )


async def rejection_codes(op: AnyOperation, case: ConformanceCase) -> dict[str, str | None]:
    """Out-of-scope request name → the code ``resolve`` rejected it with (``None``: resolved)."""
    codes: dict[str, str | None] = {}
    for name, request in case.out_of_scope_requests.items():
        try:
            await resolve_request(op, case, request)
        except Rejected as rejected:
            codes[name] = rejected.reason.code
        else:
            codes[name] = None
    return codes


async def stale_codes(op: AnyOperation, case: ConformanceCase) -> dict[str, str | None]:
    """Stale fact name → the code ``revalidate`` returned after it (``None``: it passed); each
    fact is applied in a transaction that is rolled back."""
    args = stored(op, (await resolve_request(op, case, case.valid_request)).arguments)
    codes: dict[str, str | None] = {}
    for name, fact in case.stale_facts.items():
        async with case.engine.connect() as conn:
            tx = await conn.begin()
            try:
                await fact(conn)
                reason = await op.revalidate(args, case.scope, conn)
            finally:
                await tx.rollback()
        codes[name] = reason.code if reason else None
    return codes


def codes_in_source(cls: type[Any]) -> set[str]:
    """Reason codes named in ``cls``'s module and the modules of its own package it imports
    (``Rejected("code")``, ``Reason(code="code")``) — except modules of other operations, whose
    codes are theirs."""
    module = inspect.getmodule(cls)
    if module is None:
        return set()
    top = module.__name__.split(".")[0]
    found: set[str] = set()
    for name in {module.__name__, *_own_imports(module, top)}:
        try:
            imported = importlib.import_module(name)
            source = inspect.getsource(imported)
        except (OSError, TypeError, ImportError):
            continue
        if imported is module or not _defines_an_operation(imported):
            found |= set(_CODE.findall(source))
    return found


def _defines_an_operation(module: Any) -> bool:
    return any(
        isinstance(value, type)
        and issubclass(value, Operation)
        and value.__module__ == module.__name__
        for value in vars(module).values()
    )


def _own_imports(module: Any, top: str) -> set[str]:
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {n for n in names if n.split(".")[0] == top and n != top and _is_module(n)}


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
