"""The provider's public API: create a refund, look refunds up, read the effect ledger.

Routes only translate: headers and JSON in, a ``Simulator`` outcome out, rendered as the
refund or as a problem document.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse

from signoff_card_provider.faults import Fault, FaultSpecError, parse_fault_header
from signoff_card_provider.ledger import InFlight, KeyReused, RefundParams, Replay
from signoff_card_provider.problems import Problem
from signoff_card_provider.simulator import Created, Outcome, Simulator, Unavailable
from signoff_card_provider.wire import can_drop, request_drop

router = APIRouter()
_MAX_KEY_LENGTH = 255


def get_simulator(request: Request) -> Simulator:
    """The process's one simulator, built by ``create_app``."""
    simulator: Simulator = request.app.state.simulator
    return simulator


def idempotency_key(idempotency_key: Annotated[str | None, Header()] = None) -> str:
    """The required ``Idempotency-Key``; checked before the body, so it answers 400 first."""
    if not idempotency_key:
        raise Problem(400, "idempotency_key_missing", "Send an Idempotency-Key header.")
    if len(idempotency_key) > _MAX_KEY_LENGTH:
        raise Problem(400, "invalid_idempotency_key", "Idempotency-Key is over 255 characters.")
    return idempotency_key


def forced_fault(
    simulator: Annotated[Simulator, Depends(get_simulator)],
    x_fault: Annotated[str | None, Header()] = None,
) -> Fault | None:
    """The ``X-Fault`` header, honoured only when admin is allowed."""
    if x_fault is None or not simulator.settings.allow_admin:
        return None
    try:
        return parse_fault_header(x_fault)
    except FaultSpecError as exc:
        raise Problem(400, "invalid_fault_header", str(exc)) from None


Sim = Annotated[Simulator, Depends(get_simulator)]


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness, for the test fixture and compose."""
    return {"status": "ok"}


@router.post("/v1/refunds")
async def create_refund(
    request: Request,
    simulator: Sim,
    key: Annotated[str, Depends(idempotency_key)],
    fault: Annotated[Fault | None, Depends(forced_fault)],
    params: RefundParams,
) -> JSONResponse:
    """Refund once per key: replay within the window, refuse a reuse or a collision."""
    outcome = await simulator.create(key, params, fault, can_drop=can_drop(request.scope))
    if isinstance(outcome, Created) and outcome.drop:
        request_drop(request.scope)
    return _render(outcome)


def _render(outcome: Outcome) -> JSONResponse:
    if isinstance(outcome, Created):
        return JSONResponse(outcome.refund.model_dump(mode="json"))
    if isinstance(outcome, Replay):
        body = outcome.refund.model_dump(mode="json")
        return JSONResponse(body, headers={"Idempotent-Replayed": "true"})
    if isinstance(outcome, KeyReused):
        raise Problem(
            422,
            "idempotency_key_reused",
            "This Idempotency-Key was used with different parameters.",
            refund_id=outcome.refund.id,
        )
    if isinstance(outcome, InFlight):
        raise Problem(
            409,
            "idempotency_key_in_flight",
            "A request with this Idempotency-Key is still being processed; retry later.",
        )
    assert isinstance(outcome, Unavailable)
    raise Problem(outcome.status, outcome.code, outcome.detail)


@router.get("/v1/refunds/{refund_id}")
async def get_refund(refund_id: str, simulator: Sim) -> dict[str, Any]:
    """One refund by id, whenever it was made."""
    refund = simulator.ledger.get(refund_id)
    if refund is None:
        raise Problem(404, "refund_not_found", f"No refund {refund_id!r}.")
    return refund.model_dump(mode="json")


@router.get("/v1/refunds")
async def list_refunds(
    simulator: Sim, idempotency_key: str | None = None, payment_ref: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Refunds by key and/or payment; keys are metadata here, so this works forever."""
    if idempotency_key is None and payment_ref is None:
        raise Problem(422, "invalid_request", "Filter by idempotency_key and/or payment_ref.")
    refunds = simulator.ledger.find(idempotency_key=idempotency_key, payment_ref=payment_ref)
    return {"items": [refund.model_dump(mode="json") for refund in refunds]}


@router.get("/v1/ledger")
async def read_ledger(simulator: Sim) -> dict[str, Any]:
    """Every effect ever applied, effects per key, request counts and keys in flight."""
    ledger = simulator.ledger
    return {
        "items": [effect.model_dump(mode="json") for effect in ledger.effects],
        "effects_per_key": ledger.effects_per_key(),
        "requests": ledger.request_counts(),
        "in_flight": ledger.in_flight(),
    }
