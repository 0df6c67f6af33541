"""``order.refund_missing_discount``: give back a discount a line item should have had.

The model names a payment, a line item, a discount and where the money should go; nothing
more. ``resolve`` proves the discount was owed to that line and never applied, computes the
amount itself and resolves a concrete destination, so a manager approves one exact refund.

Amount and rounding: a percentage discount is its basis points of the line's gross amount
(quantity x unit price), rounded half up to the cent (12.5 cents → 13 cents); a fixed discount
is its value in cents; either is capped at what the line still costs, then at what the payment
has left to refund and the order still totals (``signoff_club.domain``).

Destinations: ``account_credit`` is always possible (a credit on the participant's account).
"The original payment method" means a card refund through the provider for a card payment, an
e-transfer return (recorded here for the treasurer to send; no provider) for an e-transfer,
and is refused for cash (``destination_unsupported``): a cash refund must be account credit.
Every destination counts against the payment's refundable amount.

Effects follow the attempt protocol for every destination, so each refund has one attempt row
whose ``proposal_id`` is unique: ``begin_attempt`` (in the executor's revalidation transaction)
records the attempt, marks the discount applied and reserves the amount on the payment, so a
concurrent refund fails revalidation; ``perform`` calls the card provider once with the key
``signoff-refund-<proposal_id>`` — and nothing for local destinations; ``record`` writes the
refund, the payment, the line and the order total (and the credit) in the transaction that
stores the outcome, which is what keeps a local refund atomic with its outcome. A refused or
never-applied attempt releases its reservation and asks for a revision.

Product configuration: in the club, a product's configuration is its catalog row — name and
unit price now — with the discount rule the refund corrects on it (kind and value), as stored
(``signoff_club.domain.product_configuration``). ``resolve`` freezes its fingerprint into the
arguments and shows, as ``product_configuration_unchanged``, whether the catalog still sells
the product at the price the line was bought at; ``revalidate`` recomputes the fingerprint and
fails closed with ``product_configuration_changed`` when it moved (or, for a contract frozen
before the fingerprint existed, when there is nothing to compare). The facts re-checked at
execution (``RECHECKED``) are recorded in every successful result.

Outcome: ``render_result`` says what the stored result says was done — the amount, where it
went (the card's last four digits when the payment kept them), the refund's id and the order
total after it — never recomputed from today's records.

Why two modules: this one is the contract — what the model may ask, what a person approves,
what is re-checked — and ``signoff_club.refunds`` is the ledger of the attempt protocol behind
it (the attempt row and its reservation, recording an answer, concluding an unknown attempt,
stranded attempts), which ``reconcile`` and the reconciler's scans also call long after the
contract ran. Kept apart, each reads in one sitting (this one ~670 lines, of which ~230 are the
models, the per-locale texts and the reasons; ``refunds`` ~490); the attempt protocol's ledger is
the domain's record-keeping, not a part a second refund operation would write again.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field
from signoff_card_provider.client import (
    CardProviderClient,
    CardProviderError,
    KeyInFlight,
    ProviderRejected,
    ProviderUnavailable,
    ProviderUncertain,
)
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
    StrandedAttempt,
)
from signoff_contracts.outcomes import (
    OperationOutcome,
    RevisionRequired,
    Succeeded,
    TerminalFailure,
)
from signoff_contracts.reasons import Reason
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import refunds
from signoff_club import tables as t
from signoff_club.domain import (
    Destination,
    PaymentMethod,
    RequestedDestination,
    concrete_destination,
    destination_fits,
    format_money,
)
from signoff_club.refunds import (
    Answer,
    Applied,
    AppliedLocally,
    Declined,
    GivenUp,
    NotApplied,
    Refunded,
)
from signoff_club.settings import ClubSettings

log = structlog.get_logger(__name__)


class RefundRequest(BaseModel):
    """What the model chooses, from the order investigation it was shown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    payment_id: str = Field(
        min_length=1, max_length=72, description="The order's payment to refund against (pay_…)."
    )
    line_item_id: str = Field(
        min_length=1, max_length=72, description="The line item the discount was missing on."
    )
    discount_id: str = Field(
        min_length=1, max_length=72, description="The discount that should have applied (dsc_…)."
    )
    destination: RequestedDestination = Field(
        description="`original_payment_method` (back to the card or e-transfer that paid) or "
        "`account_credit` (a credit on the participant's account)."
    )


class RefundArguments(BaseModel):
    """Exactly what runs. ``payment_ref`` is the card charge for ``card_refund`` (else None):
    ``perform`` has no database, so the charge it refunds travels with the contract.
    ``order_total_cents`` is the total the preview showed (now, and less the refund after):
    revalidation compares it, so an order changed since is not refunded under wrong totals."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    order_id: str
    payment_id: str
    line_item_id: str
    discount_id: str
    amount_cents: int = Field(gt=0)
    currency: str = Field(pattern=r"^[A-Z]{3}$")
    destination: Destination
    payment_ref: str | None = None
    order_total_cents: int = Field(ge=0)
    #: the product's configuration fingerprint when resolved (module docstring); ``None`` in
    #: contracts frozen before it existed, which revalidation refuses
    product_configuration: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class RefundPreview(BaseModel):
    model_config = ConfigDict(frozen=True)

    participant_name: str
    product_name: str
    discount_name: str
    payment_method: PaymentMethod
    amount_cents: int
    currency: str
    current_order_total_cents: int
    resulting_order_total_cents: int
    destination: Destination
    #: the catalog still sells the product at the line's price (derived by ``resolve``)
    product_configuration_unchanged: bool = True


#: the facts ``revalidate`` proves again at execution, recorded in every successful result
RECHECKED: tuple[str, ...] = (
    "order_payment_line_and_discount_exist",
    "discount_owed_and_not_applied",
    "amount",
    "refundable_amount",
    "no_refund_in_progress",
    "order_total",
    "destination",
    "product_configuration",
)


class RefundResult(BaseModel):
    """What the refund became. Fields after ``resulting_order_total_cents`` came later and
    default, so results stored before them still parse."""

    model_config = ConfigDict(frozen=True)

    refund_id: str
    amount_cents: int
    currency: str
    destination: Destination
    resulting_order_total_cents: int
    provider_refund_id: str | None = None
    card_last4: str | None = None
    rechecked: tuple[str, ...] = ()


_TEXT: dict[Locale, dict[str, Any]] = {
    "en": {
        "title": "Refund a missing discount",
        "labels": {
            "participant": "Participant",
            "product": "Product",
            "discount": "Missing discount",
            "payment_method": "Paid by",
            "amount": "Refund",
            "destination": "Refund to",
            "current_total": "Order total now",
            "resulting_total": "Order total after the refund",
            "configuration": "Product configuration",
        },
        "methods": {"card": "Card", "cash": "Cash", "e_transfer": "Interac e-Transfer"},
        "destinations": {
            "card_refund": "The card that paid",
            "account_credit": "Credit on the participant's account",
            "e_transfer_return": "E-transfer back to the payer (sent by the treasurer)",
        },
        "unchanged": {
            True: "Unchanged since the sale",
            False: "Changed since the sale (the catalog price differs)",
        },
        "done": {
            "card_refund": "Refunded {amount} to {card} (refund {ref}); "
            "the order total is now {total}.",
            "account_credit": "Credited {amount} to the participant's account (refund {ref}); "
            "the order total is now {total}.",
            "e_transfer_return": "Recorded a {amount} e-transfer back to the payer for the "
            "treasurer to send (refund {ref}); the order total is now {total}.",
        },
        "card": "the card ending {last4}",
        "card_unknown": "the card that paid",
    },
    "fr": {
        "title": "Rembourser une remise oubliée",
        "labels": {
            "participant": "Participant",
            "product": "Produit",
            "discount": "Remise oubliée",
            "payment_method": "Payé par",
            "amount": "Remboursement",
            "destination": "Rembourser vers",
            "current_total": "Total actuel de la commande",
            "resulting_total": "Total de la commande après remboursement",
            "configuration": "Configuration du produit",
        },
        "methods": {"card": "Carte", "cash": "Comptant", "e_transfer": "Virement Interac"},
        "destinations": {
            "card_refund": "La carte qui a payé",
            "account_credit": "Crédit au compte du participant",
            "e_transfer_return": "Virement au payeur (envoyé par la trésorerie)",
        },
        "unchanged": {
            True: "Inchangée depuis la vente",
            False: "Modifiée depuis la vente (le prix catalogue diffère)",
        },
        "done": {
            "card_refund": "{amount} remboursés sur {card} (remboursement {ref}) ; "
            "le total de la commande est maintenant de {total}.",
            "account_credit": "{amount} crédités au compte du participant (remboursement {ref}) ; "
            "le total de la commande est maintenant de {total}.",
            "e_transfer_return": "Virement de {amount} au payeur enregistré, à envoyer par la "
            "trésorerie (remboursement {ref}) ; le total de la commande est maintenant de {total}.",
        },
        "card": "la carte se terminant par {last4}",
        "card_unknown": "la carte qui a payé",
    },
}

REASONS: dict[str, dict[Locale, str]] = {
    "order_not_found": {
        "en": "This order was not found.",
        "fr": "Cette commande est introuvable.",
    },
    "payment_not_found": {
        "en": "This payment is not part of the order.",
        "fr": "Ce paiement ne fait pas partie de la commande.",
    },
    "line_item_not_found": {
        "en": "This line item is not part of the order.",
        "fr": "Cet article ne fait pas partie de la commande.",
    },
    "discount_not_found": {
        "en": "This discount was not found.",
        "fr": "Cette remise est introuvable.",
    },
    "discount_not_applicable": {
        "en": "Nothing shows this discount should have applied to this line item.",
        "fr": "Rien n'indique que cette remise devait s'appliquer à cet article.",
    },
    "discount_already_applied": {
        "en": "This discount has already been applied to the line item.",
        "fr": "Cette remise a déjà été appliquée à l'article.",
    },
    "nothing_to_refund": {
        "en": "There is nothing left to refund for this discount.",
        "fr": "Il ne reste rien à rembourser pour cette remise.",
    },
    "insufficient_refundable": {
        "en": "The payment has {refundable_cents} cents left to refund; "
        "the refund needs {amount_cents}.",
        "fr": "Le paiement n'a plus que {refundable_cents} cents remboursables; "
        "le remboursement en demande {amount_cents}.",
    },
    "refund_in_progress": {
        "en": "Another refund of this payment is still in progress.",
        "fr": "Un autre remboursement de ce paiement est encore en cours.",
    },
    "destination_unsupported": {
        "en": "A {payment_method} payment cannot be refunded to {destination}; use account credit.",
        "fr": "Un paiement {payment_method} ne peut pas être remboursé vers {destination}; "
        "utilisez un crédit au compte.",
    },
    "amount_changed": {
        "en": "The refund would now be {current_cents} cents instead of {previous_cents}.",
        "fr": "Le remboursement serait maintenant de {current_cents} cents au lieu de "
        "{previous_cents}.",
    },
    "order_total_changed": {
        "en": "The order total is now {current_total_cents} cents instead of "
        "{previous_total_cents}.",
        "fr": "Le total de la commande est maintenant de {current_total_cents} cents au lieu de "
        "{previous_total_cents}.",
    },
    "product_configuration_changed": {
        "en": "The product's configuration (its name, its price or the discount's rule) "
        "changed since the proposal was prepared, or could not be confirmed.",
        "fr": "La configuration du produit (son nom, son prix ou la règle de la remise) a "
        "changé depuis la préparation de la proposition, ou n'a pas pu être confirmée.",
    },
    "refund_declined": {
        "en": "The card provider declined the refund ({provider_code}).",
        "fr": "Le fournisseur de paiement a refusé le remboursement ({provider_code}).",
    },
    "provider_unavailable": {
        "en": "The card provider was unavailable; no refund was made.",
        "fr": "Le fournisseur de paiement était indisponible; aucun remboursement n'a été fait.",
    },
    "refund_not_applied": {
        "en": "The card provider never received the refund; nothing was refunded.",
        "fr": "Le fournisseur de paiement n'a jamais reçu le remboursement; "
        "rien n'a été remboursé.",
    },
}


class RefundMissingDiscount(
    ExternalOperation[
        RefundRequest, RefundArguments, RefundPreview, RefundResult, CardProviderClient
    ]
):
    kind: ClassVar[str] = "order.refund_missing_discount"
    version: ClassVar[int] = 1
    section: ClassVar[str] = "orders"
    resource: ClassVar[str] = "order"
    summary: ClassVar[str] = "Refund a discount that should have applied to a line item."
    title: ClassVar[dict[Locale, str]] = {
        "en": "Refund a missing discount",
        "fr": "Rembourser une remise oubliée",
    }
    description: ClassVar[dict[Locale, str]] = {
        "en": "Refund, to the card that paid, the discount a line item should have had. "
        "The amount is computed from the order, never taken from the request.",
        "fr": "Rembourser, sur la carte qui a payé, la remise qu'une ligne aurait dû avoir. "
        "Le montant est calculé à partir de la commande, jamais pris dans la demande.",
    }
    Request = RefundRequest
    Arguments = RefundArguments
    Preview = RefundPreview
    Result = RefundResult
    #: what an approval policy may test ("amount_cents > …": docs, README "Approval policies")
    policy_facts: ClassVar[tuple[str, ...]] = ("amount_cents",)
    reasons = REASONS
    #: the attempt, its reservation and what it changes (granted to the executor, privileges.py)
    writes: ClassVar[tuple[str, ...]] = (
        t.refund_attempts.name,
        t.payments.name,
        t.refunds.name,
        t.account_credits.name,
        t.line_items.name,
        t.line_item_discounts.name,
        t.orders.name,
    )

    def __init__(self, settings: ClubSettings | None = None) -> None:
        self.settings = settings or ClubSettings()

    async def resolve(
        self, request: RefundRequest, scope: Scope, conn: AsyncConnection
    ) -> Resolved[RefundArguments, RefundPreview]:
        facts = await refunds.load_facts(
            conn,
            scope.organization_id,
            scope.resource_id,
            request.payment_id,
            request.line_item_id,
            request.discount_id,
            lock=False,
        )
        facts.require_discount_owed()
        if facts.attempt_in_progress:
            raise Rejected("refund_in_progress")
        amount, refundable = facts.amount_cents(), facts.refundable_cents()
        if amount == 0 or refundable == 0:
            raise Rejected("nothing_to_refund")
        if amount > refundable:
            raise Rejected(
                "insufficient_refundable", amount_cents=amount, refundable_cents=refundable
            )
        destination = concrete_destination(facts.method, request.destination)
        if destination is None:
            raise Rejected(
                "destination_unsupported",
                payment_method=facts.method,
                destination=request.destination,
            )
        arguments = RefundArguments(
            order_id=scope.resource_id,
            payment_id=request.payment_id,
            line_item_id=request.line_item_id,
            discount_id=request.discount_id,
            amount_cents=amount,
            currency=facts.currency,
            destination=destination,
            payment_ref=facts.payment_ref if destination == "card_refund" else None,
            order_total_cents=facts.order_total,
            product_configuration=facts.product_configuration(),
        )
        preview = RefundPreview(
            participant_name=facts.participant_name,
            product_name=facts.product_name,
            discount_name=facts.discount_name,
            payment_method=facts.method,
            amount_cents=amount,
            currency=facts.currency,
            current_order_total_cents=facts.order_total,
            resulting_order_total_cents=facts.order_total - amount,
            destination=destination,
            product_configuration_unchanged=facts.product_unchanged_since_sale(),
        )
        return Resolved(arguments, preview)

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return actor.role == "manager" and actor.organization_id == scope.organization_id

    async def revalidate(
        self, arguments: RefundArguments, scope: Scope, conn: AsyncConnection
    ) -> Reason | None:
        """Lock the order, then the payment (always in that order), and re-prove the preview."""
        if arguments.order_id != scope.resource_id:
            return Reason(code="order_not_found")
        try:
            facts = await refunds.load_facts(
                conn,
                scope.organization_id,
                arguments.order_id,
                arguments.payment_id,
                arguments.line_item_id,
                arguments.discount_id,
                lock=True,
            )
            facts.require_discount_owed()
        except Rejected as rejected:
            return rejected.reason
        amount = facts.amount_cents()
        if amount != arguments.amount_cents or facts.currency != arguments.currency:
            return Reason(
                code="amount_changed",
                params={"previous_cents": arguments.amount_cents, "current_cents": amount},
            )
        refundable = facts.refundable_cents()
        if refundable < amount:
            return Reason(
                code="insufficient_refundable",
                params={"amount_cents": amount, "refundable_cents": refundable},
            )
        if facts.attempt_in_progress:
            return Reason(code="refund_in_progress")
        if facts.order_total != arguments.order_total_cents:
            return Reason(
                code="order_total_changed",
                params={
                    "previous_total_cents": arguments.order_total_cents,
                    "current_total_cents": facts.order_total,
                },
            )
        if not destination_fits(facts.method, arguments.destination) or (
            arguments.destination == "card_refund" and facts.payment_ref != arguments.payment_ref
        ):
            return Reason(
                code="destination_unsupported",
                params={"payment_method": facts.method, "destination": arguments.destination},
            )
        if facts.product_configuration() != arguments.product_configuration:
            return Reason(code="product_configuration_changed")
        return None

    def open_provider(self) -> AbstractAsyncContextManager[CardProviderClient]:
        return CardProviderClient(
            self.settings.provider_url, timeout_s=self.settings.provider_timeout_s
        )

    async def begin_attempt(
        self, arguments: RefundArguments, scope: Scope, ctx: ExecutionContext, conn: AsyncConnection
    ) -> AttemptRef:
        return await refunds.begin(
            conn,
            arguments,
            scope.organization_id,
            ctx.proposal_id,
            lease_s=self.settings.attempt_lease_s,
            client_timeout_s=self.settings.provider_timeout_s,
            contract_id=ctx.contract_id,
        )

    async def perform(
        self, attempt: AttemptRef, arguments: RefundArguments, provider: CardProviderClient
    ) -> Refunded | AppliedLocally | Declined | NotApplied:
        """One provider call for a card refund; none at all for a local destination."""
        if arguments.destination != "card_refund":
            return AppliedLocally()
        assert arguments.payment_ref is not None
        key = attempt.idempotency_key
        if self.settings.unsafe_random_idempotency_key:  # SIGNOFF_UNSAFE__: tests only
            key = f"unsafe-{uuid.uuid4().hex}"
        try:
            refund = await provider.refund(
                key,
                arguments.payment_ref,
                arguments.amount_cents,
                arguments.currency.lower(),
            )
        except (ProviderUncertain, KeyInFlight) as exc:
            log.warning("refund.uncertain", attempt_id=attempt.attempt_id, error=str(exc))
            raise EffectUncertain(str(exc)) from exc
        except ProviderUnavailable as exc:
            if not exc.definitely_not_applied:
                raise EffectUncertain(str(exc)) from exc
            return NotApplied(code="provider_unavailable")
        except ProviderRejected as exc:
            return Declined(code=exc.code)
        return Refunded(provider_refund_id=refund.id, amount_cents=refund.amount_cents)

    async def record(
        self, attempt: AttemptRef, answer: Any, conn: AsyncConnection
    ) -> OperationOutcome:
        """The executor's answer, kept only while the attempt is still the executor's: past its
        deadline the reconciler may have concluded it (or opened a check that will), and two
        conclusions for one attempt must not both be reported — so the answer is treated as
        unknown and the reconciler, asking the provider by key, learns the same answer."""
        current = await refunds.get_attempt(conn, attempt.attempt_id, lock=True)
        if current.past_deadline:
            raise EffectUncertain("the provider answered after the attempt's deadline")
        return await _conclude(conn, attempt.attempt_id, answer, locked=current)

    async def mark_unknown(self, attempt: AttemptRef, conn: AsyncConnection) -> None:
        await refunds.mark_unknown(conn, attempt.attempt_id)

    async def reconcile(
        self, attempt_id: str, conn: AsyncConnection, provider: CardProviderClient
    ) -> OperationOutcome | None:
        """Ask by key, never re-post. "Not applied" needs the deadline (lease plus client
        timeout) to have passed *before* the lookup: a request still in flight then cannot
        land after we looked."""
        attempt = await refunds.get_attempt(conn, attempt_id)
        if attempt.outcome is not None:
            return attempt.outcome
        answer: Refunded | None = None
        if attempt.destination == "card_refund":
            try:
                found = await provider.find_by_key(attempt.idempotency_key)
            except CardProviderError as exc:
                log.info("refund.reconcile_deferred", attempt_id=attempt_id, error=str(exc))
                return None
            if found is not None:
                answer = Refunded(provider_refund_id=found.id, amount_cents=found.amount_cents)
        if answer is not None:
            return await _conclude(conn, attempt_id, answer)
        if not attempt.past_deadline:
            return None
        return await _conclude(conn, attempt_id, NotApplied(code="refund_not_applied"))

    async def stranded_attempts(
        self, conn: AsyncConnection, older_than_s: float
    ) -> list[StrandedAttempt]:
        return await refunds.stranded(conn, older_than_s)

    async def settle_by_operator(
        self, attempt_id: str, conn: AsyncConnection, *, applied: bool
    ) -> OperationOutcome | None:
        """An operator read the provider's dashboard: ``applied`` records the refund (no
        provider id is known), otherwise the reservation is released and the attempt fails.
        An attempt concluded already keeps its outcome."""
        if applied:
            return await _conclude(conn, attempt_id, AppliedLocally())
        return await _conclude(conn, attempt_id, GivenUp(correlation_id=new_id("cor")))

    def render_preview(self, preview: RefundPreview, locale: Locale) -> RenderedPreview:
        text = _TEXT[locale]

        def money(cents: int) -> str:
            return format_money(cents, preview.currency, locale)

        values = {
            "participant": preview.participant_name,
            "product": preview.product_name,
            "discount": preview.discount_name,
            "payment_method": text["methods"][preview.payment_method],
            "amount": money(preview.amount_cents),
            "destination": text["destinations"][preview.destination],
            "current_total": money(preview.current_order_total_cents),
            "resulting_total": money(preview.resulting_order_total_cents),
            "configuration": text["unchanged"][preview.product_configuration_unchanged],
        }
        lines = [
            PreviewLine(label=text["labels"][key], value=value) for key, value in values.items()
        ]
        return RenderedPreview(title=text["title"], lines=lines)

    def render_result(self, result: RefundResult, locale: Locale) -> str:
        text = _TEXT[locale]

        def money(cents: int) -> str:
            return format_money(cents, result.currency, locale)

        card = (
            text["card"].format(last4=result.card_last4)
            if result.card_last4
            else text["card_unknown"]
        )
        return str(text["done"][result.destination]).format(
            amount=money(result.amount_cents),
            card=card,
            ref=result.provider_refund_id or result.refund_id,
            total=money(result.resulting_order_total_cents),
        )


async def _conclude(
    conn: AsyncConnection,
    attempt_id: str,
    answer: Answer | GivenUp,
    *,
    locked: refunds.Attempt | None = None,
) -> OperationOutcome:
    """Store the answer and its outcome once; a later call returns the stored outcome.

    ``locked``: the attempt as the caller already read it ``FOR UPDATE`` in this transaction
    (the executor's ``record``), so it is not read and locked a second time."""
    attempt = locked or await refunds.get_attempt(conn, attempt_id, lock=True)
    if attempt.outcome is not None:
        if isinstance(answer, Refunded) and attempt.status != "succeeded":
            # only a provider call made after the lease ran out can get here: money moved
            # that the club recorded as not refunded — an operator must look
            log.error(
                "refund.answer_after_conclusion",
                attempt_id=attempt_id,
                status=attempt.status,
                provider_refund_id=answer.provider_refund_id,
            )
        return attempt.outcome
    outcome: OperationOutcome
    if isinstance(answer, Refunded | AppliedLocally):
        provider_refund_id = answer.provider_refund_id if isinstance(answer, Refunded) else None
        applied: Applied = await refunds.apply(conn, attempt, provider_refund_id)
        result = RefundResult(
            refund_id=applied.refund_id,
            amount_cents=attempt.amount_cents,
            currency=attempt.currency,
            destination=attempt.destination,
            resulting_order_total_cents=applied.order_total_cents,
            provider_refund_id=provider_refund_id,
            card_last4=applied.card_last4,
            rechecked=RECHECKED,
        )
        status, outcome = "succeeded", Succeeded(result=result.model_dump(mode="json"))
    elif isinstance(answer, Declined):
        await refunds.release(conn, attempt)
        reason = Reason(code="refund_declined", params={"provider_code": answer.code})
        status, outcome = "failed", RevisionRequired(reason=reason)
    elif isinstance(answer, GivenUp):
        await refunds.release(conn, attempt)
        status, outcome = "failed", TerminalFailure(correlation_id=answer.correlation_id)
    else:
        await refunds.release(conn, attempt)
        status, outcome = "not_applied", RevisionRequired(reason=Reason(code=answer.code))
    await refunds.conclude(conn, attempt_id, status, _response(answer), outcome)
    return outcome


def _response(answer: Answer | GivenUp) -> dict[str, Any]:
    """The provider's answer as stored facts (never a raw provider payload)."""
    kind = type(answer).__name__
    if isinstance(answer, Refunded):
        return {
            "answer": kind,
            "provider_refund_id": answer.provider_refund_id,
            "amount_cents": answer.amount_cents,
        }
    if isinstance(answer, Declined | NotApplied):
        return {"answer": kind, "code": answer.code}
    if isinstance(answer, GivenUp):
        return {"answer": kind, "correlation_id": answer.correlation_id}
    return {"answer": kind}
