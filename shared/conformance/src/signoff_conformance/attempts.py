"""Checks of the attempt protocol, for operations whose effect is outside the database.

The protocol is what keeps a lost provider response from becoming a second refund: the attempt
is durable before the call, an unknown answer is marked rather than retried, and only
``reconcile`` — asking, never acting — concludes it. These checks prove each of those steps
against the operation's real provider client (or the case's ``provider_factory``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from signoff_contracts.operations import (
    AnyOperation,
    AttemptRef,
    ExternalOperation,
    StrandedAttempt,
)
from signoff_contracts.outcomes import Succeeded
from signoff_runtime.testing import wait_until

from signoff_conformance.case import ConformanceCase
from signoff_conformance.driver import begin, new_context, reconcile, resolve_request, run_external


class AttemptProtocolChecks:
    """Mixed into ``OperationConformance``; collected only for ``ExternalOperation``s."""

    #: how long ``reconcile`` may keep answering ``None`` after a lost response
    reconcile_within: ClassVar[float] = 10.0

    async def test_attempt_is_committed_before_the_provider_is_called(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        probe = case.attempt_exists
        assert probe is not None, "ConformanceCase.attempt_exists is required for external ops"
        seen: list[bool] = []

        async def from_another_connection(attempt: AttemptRef) -> None:
            async with case.engine.connect() as other:
                seen.append(await probe(other, attempt))

        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        run = await run_external(
            op, case, new_context(case), arguments, on_provider_call=from_another_connection
        )
        assert run.status == "executed", f"the execution did not run: {run}"
        assert seen, "perform made no call on the provider the kit could observe"
        assert all(seen), "the provider was called before the attempt was committed"

    async def test_lost_response_is_reconciled_to_one_effect(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        if case.lose_next_response is None:
            pytest.skip("the case has no lose_next_response hook")
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        before = await case.count_effects()
        await case.lose_next_response()
        run = await run_external(op, case, new_context(case), arguments)
        assert run.status == "uncertain", (
            f"perform must raise EffectUncertain when the answer is lost (got {run.status})"
        )
        assert run.attempt is not None
        attempt_id = run.attempt.attempt_id

        async def concluded() -> Any:
            return await reconcile(op, case, attempt_id)

        outcome = await wait_until(
            concluded, timeout=self.reconcile_within, what=f"reconcile({attempt_id}) to conclude"
        )
        assert isinstance(outcome, Succeeded), f"the provider applied it; reconcile: {outcome!r}"
        op.Result.model_validate(outcome.result)
        again = await reconcile(op, case, attempt_id)
        assert isinstance(again, Succeeded), f"a second reconcile answered {again!r}"
        effects = await case.count_effects() - before
        assert effects == 1, f"{effects} provider effects after a lost response and reconcile"

    async def test_an_attempt_within_its_lease_is_not_stranded(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        """``stranded_attempts`` (the reconciler's scan) must spare an attempt whose executor
        may still be calling the provider: only the lease's end makes an attempt stranded."""
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        attempt = await begin(op, case, new_context(case), arguments)
        assert isinstance(attempt, AttemptRef), f"begin_attempt did not start: {attempt}"
        assert isinstance(op, ExternalOperation)
        async with case.engine.connect() as conn:
            found = await op.stranded_attempts(conn, 0.0)
        assert all(isinstance(s, StrandedAttempt) for s in found), found
        assert attempt.attempt_id not in [s.attempt_id for s in found], (
            "stranded_attempts listed an attempt still within its lease"
        )

    async def test_reconcile_never_creates_an_effect(
        self, op: AnyOperation, case: ConformanceCase
    ) -> None:
        arguments = (await resolve_request(op, case, case.valid_request)).arguments
        before = await case.count_effects()
        attempt = await begin(op, case, new_context(case), arguments)
        assert isinstance(attempt, AttemptRef), f"begin_attempt did not start: {attempt}"
        assert isinstance(op, ExternalOperation)
        async with case.engine.begin() as conn:  # a crash before the call, then the sweep
            await op.mark_unknown(attempt, conn)
        outcomes = [await reconcile(op, case, attempt.attempt_id) for _ in range(2)]
        effects = await case.count_effects() - before
        assert effects == 0, f"reconcile created {effects} effect(s); it may only ask"
        assert not any(isinstance(o, Succeeded) for o in outcomes), (
            f"reconcile reported success for a call never made: {outcomes}"
        )
