"""The toy domain's external operation: sending an account a voucher through a provider.

The provider is an in-process stand-in with the two properties the attempt protocol relies on —
idempotency keys and answers that can be lost after the effect applied — so the kit's external
checks can be proven without a network. ``SendVoucher`` is correct (the kit's self-test
breaks it one step of the protocol at a time).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    Actor,
    AttemptRef,
    EffectUncertain,
    ExecutionContext,
    ExternalOperation,
    Locale,
    PreviewLine,
    Rejected,
    RenderedPreview,
    Resolved,
    Scope,
)
from signoff_contracts.outcomes import OperationOutcome, Succeeded
from signoff_contracts.reasons import Reason
from sqlalchemy import text

from signoff_conformance.toy.domain import euros, find_account

VOUCHER_CENTS = 1500


class ResponseLost(Exception):
    """The provider applied the call; its answer never arrived."""


@dataclass
class VoucherProvider:
    """Issues voucher codes, once per idempotency key."""

    issued: dict[str, tuple[str, str]] = field(default_factory=dict)  # key → (account, code)
    lose_next: bool = False

    async def issue(self, key: str, account_id: str) -> str:
        if key not in self.issued:
            self.issued[key] = (account_id, new_id("vch"))
        if self.lose_next:
            self.lose_next = False
            raise ResponseLost(key)
        return self.issued[key][1]

    async def find(self, key: str) -> str | None:
        found = self.issued.get(key)
        return found[1] if found else None

    def count(self, account_id: str) -> int:
        return sum(1 for account, _ in self.issued.values() if account == account_id)


PROVIDER = VoucherProvider()


class SendVoucher(ExternalOperation[Any, Any, Any, Any, VoucherProvider]):
    kind = "account.send_voucher"
    version = 1
    section = "billing"
    resource = "account"
    summary = "Send an account a fixed-value voucher through the voucher provider."
    reasons: ClassVar[dict[str, dict[Locale, str]]] = {
        "account_not_found": {"en": "No such account.", "fr": "Compte introuvable."},
        "account_closed": {"en": "The account is closed.", "fr": "Le compte est fermé."},
    }

    class Request(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")
        account_id: str

    class Arguments(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")
        account_id: str
        amount_cents: int

    class Preview(BaseModel):
        model_config = ConfigDict(frozen=True)
        account_name: str
        amount_cents: int

    class Result(BaseModel):
        model_config = ConfigDict(frozen=True)
        code: str

    def open_provider(self) -> AbstractAsyncContextManager[VoucherProvider]:
        @asynccontextmanager
        async def provider() -> AsyncIterator[VoucherProvider]:
            yield PROVIDER

        return provider()

    async def resolve(self, request: Any, scope: Scope, conn: Any) -> Resolved[Any, Any]:
        account = await find_account(conn, request.account_id, scope.organization_id)
        if account is None or account["status"] != "open":
            raise Rejected("account_not_found")
        return Resolved(
            arguments=self.Arguments(account_id=account["id"], amount_cents=VOUCHER_CENTS),
            preview=self.Preview(account_name=account["name"], amount_cents=VOUCHER_CENTS),
        )

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return actor.organization_id == scope.organization_id and actor.role == "manager"

    async def revalidate(self, arguments: Any, scope: Scope, conn: Any) -> Reason | None:
        account = await find_account(conn, arguments.account_id, scope.organization_id, lock=True)
        if account is None:
            return Reason(code="account_not_found")
        return None if account["status"] == "open" else Reason(code="account_closed")

    async def begin_attempt(
        self, arguments: Any, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> AttemptRef:
        attempt = AttemptRef(attempt_id=new_id("att"), idempotency_key=f"v-{ctx.proposal_id}")
        await self.store_attempt(conn, attempt, ctx.proposal_id, arguments.account_id)
        return attempt

    async def store_attempt(
        self, conn: Any, attempt: AttemptRef, proposal_id: str, account_id: str
    ) -> None:
        await conn.execute(
            text(
                "INSERT INTO conformance_toy.voucher_attempts "
                "(id, proposal_id, idempotency_key, account_id, status) "
                "VALUES (:id, :proposal, :key, :account, 'pending')"
            ),
            {
                "id": attempt.attempt_id,
                "proposal": proposal_id,
                "key": attempt.idempotency_key,
                "account": account_id,
            },
        )

    async def perform(self, attempt: AttemptRef, arguments: Any, provider: Any) -> Any:
        try:
            return await provider.issue(attempt.idempotency_key, arguments.account_id)
        except ResponseLost as exc:
            raise EffectUncertain(attempt.attempt_id) from exc

    async def record(self, attempt: AttemptRef, answer: Any, conn: Any) -> OperationOutcome:
        await self.settle(conn, attempt.attempt_id, answer)
        return Succeeded(result=self.Result(code=answer).model_dump(mode="json"))

    async def settle(self, conn: Any, attempt_id: str, code: str) -> None:
        await conn.execute(
            text(
                "UPDATE conformance_toy.voucher_attempts SET status = 'succeeded', code = :code "
                "WHERE id = :id"
            ),
            {"id": attempt_id, "code": code},
        )

    async def mark_unknown(self, attempt: AttemptRef, conn: Any) -> None:
        await conn.execute(
            text("UPDATE conformance_toy.voucher_attempts SET status = 'unknown' WHERE id = :id"),
            {"id": attempt.attempt_id},
        )

    async def reconcile(
        self, attempt_id: str, conn: Any, provider: VoucherProvider
    ) -> OperationOutcome | None:
        row = (
            (
                await conn.execute(
                    text(
                        "SELECT * FROM conformance_toy.voucher_attempts WHERE id = :id FOR UPDATE"
                    ),
                    {"id": attempt_id},
                )
            )
            .mappings()
            .first()
        )
        if row is None:
            return None
        code = await self.ask(provider, row)
        if code is None:
            return None  # not applied yet; only after the lease would it conclude "never"
        await self.settle(conn, attempt_id, code)
        return Succeeded(result=self.Result(code=code).model_dump(mode="json"))

    async def ask(self, provider: VoucherProvider, row: Any) -> str | None:
        return await provider.find(row["idempotency_key"])

    def render_preview(self, preview: Any, locale: Locale) -> RenderedPreview:
        title = {"en": "Send a {amount} voucher", "fr": "Envoyer un bon de {amount}"}[locale]
        label = {"en": "Account", "fr": "Compte"}[locale]
        return RenderedPreview(
            title=title.format(amount=euros(preview.amount_cents)),
            lines=[PreviewLine(label=label, value=preview.account_name)],
        )

    def render_result(self, result: Any, locale: Locale) -> str:
        return {"en": "Sent voucher {code}.", "fr": "Bon {code} envoyé."}[locale].format(
            code=result.code
        )
