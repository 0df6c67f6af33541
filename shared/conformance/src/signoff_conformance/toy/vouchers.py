"""The toy domain's external operation: sending an account a voucher through a provider.

The provider is an in-process stand-in with the properties the attempt protocol relies on —
idempotency keys, answers that can be lost after the effect applied, refusals — so the kit's
external checks can be proven without a network. What it does with a key can be scripted (test
hooks, all off by default): a service's tests use them to drive the executor down every path.
``SendVoucher`` is correct (the kit's self-test breaks it one step of the protocol at a time).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

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
from signoff_contracts.outcomes import OperationOutcome, RevisionRequired, Succeeded
from signoff_contracts.reasons import Reason
from sqlalchemy import text

from signoff_conformance.toy.domain import SECTION, euros, find_account, may_decide

VOUCHER_CENTS = 1500
#: what the provider does with a key: ``apply`` (issue, answer), ``lose`` (issue, then the answer
#: is lost), ``refuse`` (issue nothing, answer refused), ``hang`` (wait for ``release()``, then
#: end the caller as if its process had been killed mid-call: ``CancelledError``, nothing issued)
Mode = Literal["apply", "lose", "refuse", "hang"]


class ResponseLost(Exception):
    """The provider applied the call; its answer never arrived."""


class VoucherRefused(Exception):
    """The provider refused the call and issued nothing."""


def voucher_key(proposal_id: str) -> str:
    """The idempotency key of a proposal's voucher: one voucher per proposal, however often
    it is asked for."""
    return f"v-{proposal_id}"


@dataclass
class VoucherProvider:
    """Issues voucher codes, once per idempotency key.

    ``calls`` counts every request that reached it, per key; ``issued`` what a key actually did
    (at most one voucher); ``opened`` / ``closed`` the client sessions (``session``)."""

    issued: dict[str, tuple[str, str]] = field(default_factory=dict)  # key → (account, code)
    lose_next: bool = False
    default: Mode = "apply"
    script: dict[str, Mode] = field(default_factory=dict)  # key → what to do with it
    calls: Counter[str] = field(default_factory=Counter)
    opened: int = 0
    closed: int = 0
    #: set by the first call (a test waits on it to know a call is under way)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    _released: asyncio.Event = field(default_factory=asyncio.Event)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[VoucherProvider]:
        self.opened += 1
        try:
            yield self
        finally:
            self.closed += 1

    def release(self) -> None:
        """Let every ``hang`` call end."""
        self._released.set()

    async def issue(self, key: str, account_id: str) -> str:
        self.calls[key] += 1
        self.entered.set()
        mode = self.script.get(key, self.default)
        if self.lose_next:
            self.lose_next, mode = False, "lose"
        if mode == "hang":
            await self._released.wait()
            raise asyncio.CancelledError  # the caller "dies" here
        if mode == "refuse":
            raise VoucherRefused(key)
        if key not in self.issued:
            self.issued[key] = (account_id, new_id("vch"))
        if mode == "lose":
            raise ResponseLost(key)
        return self.issued[key][1]

    async def find(self, key: str) -> str | None:
        found = self.issued.get(key)
        return found[1] if found else None

    def count(self, account_id: str) -> int:
        return sum(1 for account, _ in self.issued.values() if account == account_id)

    def effects(self, key: str) -> int:
        """Vouchers issued under ``key`` (0 or 1: a key applies at most once)."""
        return 1 if key in self.issued else 0


PROVIDER = VoucherProvider()


class SendVoucher(ExternalOperation[Any, Any, Any, Any, VoucherProvider]):
    kind = "account.send_voucher"
    version = 1
    section = SECTION
    resource = "account"
    summary = "Send an account a fixed-value voucher through the voucher provider."
    reasons: ClassVar[dict[str, dict[Locale, str]]] = {
        "account_not_found": {"en": "No such account.", "fr": "Compte introuvable."},
        "account_closed": {"en": "The account is closed.", "fr": "Le compte est fermé."},
        "voucher_refused": {
            "en": "The voucher provider refused the voucher.",
            "fr": "Le fournisseur a refusé le bon.",
        },
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

    def __init__(self, provider: VoucherProvider | None = None) -> None:
        #: the kit's checks use the shared ``PROVIDER``; a test can give each run its own
        self.provider = PROVIDER if provider is None else provider

    def open_provider(self) -> AbstractAsyncContextManager[VoucherProvider]:
        return self.provider.session()

    async def resolve(self, request: Any, scope: Scope, conn: Any) -> Resolved[Any, Any]:
        account = await find_account(conn, request.account_id, scope.organization_id)
        if account is None or account["status"] != "open":
            raise Rejected("account_not_found")
        return Resolved(
            arguments=self.Arguments(account_id=account["id"], amount_cents=VOUCHER_CENTS),
            preview=self.Preview(account_name=account["name"], amount_cents=VOUCHER_CENTS),
        )

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return may_decide(actor, scope)

    async def revalidate(self, arguments: Any, scope: Scope, conn: Any) -> Reason | None:
        account = await find_account(conn, arguments.account_id, scope.organization_id, lock=True)
        if account is None:
            return Reason(code="account_not_found")
        return None if account["status"] == "open" else Reason(code="account_closed")

    async def begin_attempt(
        self, arguments: Any, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> AttemptRef:
        attempt = AttemptRef(attempt_id=new_id("att"), idempotency_key=voucher_key(ctx.proposal_id))
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
        except VoucherRefused:
            return None  # a definite answer: nothing was issued

    async def record(self, attempt: AttemptRef, answer: Any, conn: Any) -> OperationOutcome:
        if answer is None:
            await conn.execute(
                text(
                    "UPDATE conformance_toy.voucher_attempts SET status = 'refused' WHERE id = :id"
                ),
                {"id": attempt.attempt_id},
            )
            return RevisionRequired(reason=Reason(code="voucher_refused"))
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
