"""The checks every operation must pass, as a test class adopters subclass.

One test method per promise, so a failure names the promise an operation breaks. Checks that do
not apply to the operation's kind of effect (the attempt protocol, for a local operation) are
not collected for it, rather than reported as skipped.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ValidationError
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    LOCALES,
    Actor,
    AnyOperation,
    ExternalOperation,
    Locale,
    Rejected,
    RenderedPreview,
    Scope,
    check_operation,
)
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.reasons import Reason

from signoff_conformance import probes
from signoff_conformance.attempts import AttemptProtocolChecks
from signoff_conformance.case import ConformanceCase
from signoff_conformance.codes import ReasonCodeChecks
from signoff_conformance.driver import Run, new_context, resolve_request, run_execution, stored
from signoff_conformance.properties import RequestProperties
from signoff_conformance.registration import RegistrationChecks

_EXTERNAL_ONLY = tuple(name for name in vars(AttemptProtocolChecks) if name.startswith("test_"))


class OperationConformance(
    RegistrationChecks, ReasonCodeChecks, RequestProperties, AttemptProtocolChecks
):
    """Subclass as ``Test…`` with ``operation = YourOperation`` and a ``case`` fixture;
    optionally ``out_of_scope_codes`` / ``stale_codes`` (each refusal's expected reason code)
    and ``check_resolved`` (what your rows prove about a resolved request)."""

    operation: ClassVar[type[AnyOperation]]
    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [
        pytest.mark.integration,
        pytest.mark.conformance,
    ]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        op = cls.__dict__.get("operation")
        if isinstance(op, type) and not issubclass(op, ExternalOperation):
            for name in _EXTERNAL_ONLY:
                setattr(cls, name, None)  # pytest collects only functions
        if not cls.check_registration:
            cls.test_operation_is_registered_under_its_entry_point = None  # type: ignore[assignment]

    @pytest.fixture
    def op(self) -> AnyOperation:
        return self.operation()

    @pytest.fixture
    def case(self) -> ConformanceCase:
        pytest.fail(f"{type(self).__name__} must define a `case` fixture (a ConformanceCase)")

    # -- definition ---------------------------------------------------------------------------

    def test_check_operation(self) -> None:
        check_operation(self.operation)

    def test_ttl_is_positive(self, op: AnyOperation) -> None:
        assert isinstance(op.ttl, timedelta) and op.ttl > timedelta(0), f"ttl {op.ttl!r}"

    def test_authorize_allows_the_manager(self, op: AnyOperation, case: ConformanceCase) -> None:
        assert op.authorize(case.manager, case.scope) is True

    def test_authorize_refuses_the_viewer(self, op: AnyOperation, case: ConformanceCase) -> None:
        assert op.authorize(case.viewer, case.scope) is False

    def test_authorize_refuses_another_organization(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        stranger = Actor(
            user_id=case.manager.user_id, organization_id=new_id("org"), role=case.manager.role
        )
        assert op.authorize(stranger, case.scope) is False, "a manager elsewhere is no one here"

    # -- the request --------------------------------------------------------------------------

    def test_request_rejects_unknown_fields(self, op: AnyOperation, case: ConformanceCase) -> None:
        op.parse_request(case.valid_request)
        smuggled = {**case.valid_request, "amount_cents": 1}
        assert not _parses(op.parse_request, smuggled), (
            "Request accepted an unknown field `amount_cents`: declare extra='forbid', or a "
            "model could smuggle values past the preview"
        )

    def test_request_rejects_wrongly_typed_fields(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        variants = self.wrongly_typed_requests(op, case)
        assert variants, "valid_request has no typed field to mistype"
        accepted = [
            name for name, request in variants.items() if _parses(op.parse_request, request)
        ]
        assert not accepted, f"Request accepted a wrongly typed value for: {accepted}"

    async def test_out_of_scope_requests_are_rejected(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        before = await case.count_effects()
        resolved = []
        for name, request in case.out_of_scope_requests.items():
            try:
                await resolve_request(op, case, request)
            except Rejected as rejected:
                assert rejected.reason.code, f"{name}: Rejected without a code"
            else:
                resolved.append(name)
        assert not resolved, f"resolve accepted out-of-scope requests: {resolved}"
        assert await case.count_effects() == before, "resolving stored an effect"

    # -- frozen contract and preview ------------------------------------------------------------

    async def test_arguments_round_trip_through_json(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        _assert_round_trip(arguments, op.Arguments, op.parse_arguments)

    async def test_preview_round_trips_through_json(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        preview = (await resolve_request(op, case, case.valid_request)).preview
        _assert_round_trip(preview, op.Preview, op.parse_preview)

    @pytest.mark.parametrize("locale", LOCALES)
    async def test_render_preview(
        self, op: AnyOperation, case: ConformanceCase, locale: Locale
    ) -> None:
        preview = (await resolve_request(op, case, case.valid_request)).preview
        rendered = op.render_preview(preview, locale)
        assert isinstance(rendered, RenderedPreview) and rendered.title.strip()
        assert (
            op.render_preview(op.parse_preview(json.loads(preview.model_dump_json())), locale)
            == rendered
        ), "rendering must depend on the preview alone"
        leaks = probes.leaked_request_text(case.valid_request, preview, rendered)
        assert not leaks, f"rendered request text the preview does not hold: {leaks}"

    async def test_render_result_in_every_locale(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        """The outcome line is the operation's own sentence, from the stored result alone."""
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        run = await run_execution(op, case, new_context(case), arguments)
        _assert_succeeded(op, run)
        assert isinstance(run.outcome, Succeeded)
        stored_result = json.loads(json.dumps(run.outcome.result))
        problems: dict[str, str] = {}
        for locale in LOCALES:
            try:
                said = op.render_result(op.parse_result(stored_result), locale)
                again = op.render_result(op.parse_result(stored_result), locale)
            except Exception as exc:  # the check reports any failure by locale
                problems[locale] = repr(exc)
                continue
            if not isinstance(said, str) or not said.strip():
                problems[locale] = f"rendered {said!r}"
            elif said != again:
                problems[locale] = "rendering must depend on the stored result alone"
        assert not problems, f"render_result failed: {problems}"

    @pytest.mark.parametrize("kind", probes.CORRUPTIONS)
    async def test_corrupted_arguments_fail_to_parse(
        self, op: AnyOperation, case: ConformanceCase, kind: str
    ) -> None:
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        variants = probes.corrupted(op.Arguments, arguments.model_dump(mode="json"), kind)
        if not variants:
            pytest.skip(f"Arguments has nothing to corrupt as {kind}")
        parsed = [name for name, data in variants.items() if _parses(op.parse_arguments, data)]
        assert not parsed, f"corrupted stored arguments parsed ({kind}): {parsed}"

    # -- revalidation ---------------------------------------------------------------------------

    async def test_revalidate_passes_on_fresh_state(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        args = stored(op, (await resolve_request(op, case, case.valid_request)).arguments)
        assert await _revalidate(op, case, args) is None

    async def test_revalidate_fails_closed_when_stale(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        args = stored(op, (await resolve_request(op, case, case.valid_request)).arguments)
        ignored = []
        for name, fact in case.stale_facts.items():
            fresh = await _revalidate(op, case, args)
            assert fresh is None, f"state not fresh before {name!r}: {fresh} (mutate via conn)"
            reason = await _revalidate(op, case, args, fact=fact)
            if not isinstance(reason, Reason):
                ignored.append(name)
        assert not ignored, f"revalidate passed although the preview is stale: {ignored}"

    async def test_revalidate_fails_closed_in_another_organization(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        args = stored(op, (await resolve_request(op, case, case.valid_request)).arguments)
        elsewhere = case.scope.model_copy(update={"organization_id": new_id("org")})
        reason = await _revalidate(op, case, args, scope=elsewhere)
        assert isinstance(reason, Reason), "revalidate found the records in another organization"

    # -- execution ------------------------------------------------------------------------------

    async def test_repeated_execution_has_one_effect(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        ctx = new_context(case)
        before = await case.count_effects()
        first = await run_execution(op, case, ctx, arguments)
        _assert_succeeded(op, first)
        second = await run_execution(op, case, ctx, arguments)
        effects = await case.count_effects() - before
        assert effects == 1, (
            f"{effects} effects from one contract executed twice (second run: {second.status}); "
            "key the effect on ctx.proposal_id so a repeat is refused or a no-op"
        )

    # -- overridable inputs ---------------------------------------------------------------------

    def wrongly_typed_requests(
        self, op: AnyOperation, case: ConformanceCase
    ) -> dict[str, dict[str, Any]]:
        """Override when a field's type defeats the probe (e.g. ``str | dict``)."""
        return probes.wrongly_typed(op.Request, case.valid_request)


def _parses(parse: Any, data: Any) -> bool:
    try:
        parse(data)
    except ValidationError:
        return False
    return True


def _assert_round_trip(model: BaseModel, cls: type[BaseModel], parse: Any) -> None:
    assert type(model) is cls, f"resolve returned {type(model).__name__}, not {cls.__name__}"
    dumped = model.model_dump_json()
    again = parse(json.loads(dumped))
    assert again == model, "model → JSON → model changed the value"
    assert cls.model_validate_json(dumped) == model
    assert json.loads(again.model_dump_json()) == json.loads(dumped), "JSON → model → JSON drift"


def _assert_succeeded(op: AnyOperation, run: Run) -> None:
    assert run.status == "executed", f"the first execution did not run: {run}"
    assert isinstance(run.outcome, Succeeded), f"first execution outcome {run.outcome!r}"
    result = op.Result.model_validate(run.outcome.result)
    if run.result is not None:
        assert result == run.result, "Result does not round-trip through Succeeded.result"


async def _revalidate(
    op: AnyOperation,
    case: ConformanceCase,
    args: Any,
    *,
    fact: Any = None,
    scope: Scope | None = None,
) -> Reason | None:
    """``revalidate`` (after ``fact``, if any) in a transaction that is always rolled back,
    so each stale fact is judged against the case's otherwise fresh state."""
    async with case.engine.connect() as conn:
        tx = await conn.begin()
        try:
            if fact is not None:
                await fact(conn)
            return await op.revalidate(args, scope or case.scope, conn)
        finally:
            await tx.rollback()
