"""Builds the simulator's ASGI app from its settings.

Served for real by ``python -m signoff_card_provider`` (uvicorn with
``wire.DroppableH11Protocol``, so ``drop_response`` can cut connections). Routes:

=========================  ====================================================
``POST /v1/refunds``       create (``Idempotency-Key`` required; ``X-Fault`` opt.)
``GET /v1/refunds/{id}``   one refund
``GET /v1/refunds``        ``?idempotency_key=`` and/or ``?payment_ref=`` → items
``GET /v1/ledger``         effects, effects per key, request counts, keys in flight
``GET /healthz``           liveness
``POST /_admin/clock``     ``{"advance_seconds": n}``            (admin only)
``POST /_admin/faults``    scripted rules / seeded dice (faults.py) (admin only)
``GET /_admin/faults``     current plan and injected-fault history (admin only)
``POST /_admin/reset``     forget everything                     (admin only)
=========================  ====================================================
"""

from __future__ import annotations

from fastapi import FastAPI

from signoff_card_provider import admin, routes
from signoff_card_provider.problems import install_problem_handlers
from signoff_card_provider.settings import Settings
from signoff_card_provider.simulator import Simulator
from signoff_card_provider.wire import DropResponseMiddleware


def create_app(settings: Settings) -> FastAPI:
    """One app, one simulator; admin routes only when ``settings.allow_admin``."""
    app = FastAPI(
        title="signoff card-provider simulator",
        summary="Stripe-like refunds with idempotency keys and injectable faults.",
        version="0.1.0",
    )
    app.state.simulator = Simulator(settings)
    install_problem_handlers(app)
    app.include_router(routes.router)
    if settings.allow_admin:
        app.include_router(admin.router)
    app.add_middleware(DropResponseMiddleware)
    return app
