"""Broken variants of the kit's toy operations: each breaks exactly one promise, so the kit's
self-test can show that exactly the matching check fails. Copied into a ``pytester`` directory
and imported there, so it imports only installed packages."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict
from signoff_conformance.toy.domain import GrantCredit, euros, find_account
from signoff_conformance.toy.vouchers import SendVoucher, VoucherProvider, voucher_key
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    AttemptRef,
    ExecutionContext,
    Locale,
    RenderedPreview,
    Resolved,
    Scope,
)
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.reasons import Reason


class ExtraFieldsGrant(GrantCredit):
    """Broken: the request silently drops fields it does not know (an amount, say)."""

    class Request(GrantCredit.Request):
        model_config = ConfigDict(frozen=True, extra="ignore")


class StalenessBlindGrant(GrantCredit):
    """Broken: revalidation only checks that the account still exists."""

    async def revalidate(self, arguments: Any, scope: Scope, conn: Any) -> Reason | None:
        account = await find_account(conn, arguments.account_id, scope.organization_id, lock=True)
        return None if account is not None else Reason(code="account_not_found")


class RepeatingGrant(GrantCredit):
    """Broken: the credit is keyed on a fresh id, so a repeated contract credits twice."""

    def dedup_key(self, ctx: ExecutionContext) -> str:
        return new_id("cmd")


class LeakyGrant(GrantCredit):
    """Broken: resolve looks the account up by id alone, in any organization."""

    lookup_organization: ClassVar[bool] = False


class NoteShowingGrant(GrantCredit):
    """Broken: the preview shows the model's note, which was never frozen into the preview."""

    last_note: ClassVar[str] = ""

    async def resolve(self, request: Any, scope: Scope, conn: Any) -> Resolved[Any, Any]:
        type(self).last_note = request.note
        return await super().resolve(request, scope, conn)

    def render_preview(self, preview: Any, locale: Locale) -> RenderedPreview:
        rendered = super().render_preview(preview, locale)
        return rendered.model_copy(update={"title": f"{rendered.title} — {self.last_note}"})


class UntranslatedResultGrant(GrantCredit):
    """Broken: the outcome is written in English only, so a French reader gets an error."""

    def render_result(self, result: Any, locale: Locale) -> str:
        return {"en": f"Granted {euros(result.amount_cents)}."}[locale]


class UntranslatedReasonGrant(GrantCredit):
    """Broken: a reason code it returns has no sentence in French (and one none at all)."""

    reasons: ClassVar[dict[str, dict[Locale, str]]] = {
        "account_not_found": {"en": "No such account.", "fr": "Compte introuvable."},
        "account_closed": {"en": "The account is closed."},
    }


class LateAttemptVoucher(SendVoucher):
    """Broken: the attempt is stored only with the answer — a crash mid-call leaves no trace."""

    pending: ClassVar[dict[str, tuple[str, str]]] = {}

    async def begin_attempt(
        self, arguments: Any, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> AttemptRef:
        attempt = AttemptRef(attempt_id=new_id("att"), idempotency_key=voucher_key(ctx.proposal_id))
        self.pending[attempt.attempt_id] = (ctx.proposal_id, arguments.account_id)
        return attempt

    async def record(self, attempt: AttemptRef, answer: Any, conn: Any) -> OperationOutcome:
        await self.store_attempt(conn, attempt, *self.pending[attempt.attempt_id])
        return await super().record(attempt, answer, conn)


class BlindRetryVoucher(SendVoucher):
    """Broken: reconcile issues the voucher again (new key) when the provider has none."""

    async def ask(self, provider: VoucherProvider, row: Any) -> str | None:
        found = await provider.find(row["idempotency_key"])
        return found or await provider.issue(new_id("retry"), row["account_id"])
