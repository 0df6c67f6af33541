"""What every HTTP service answers besides its own routes: its probes and ``/metrics``.

- ``GET /livez`` — liveness: the process's own event loop answers. It checks nothing outside
  the process, so an outage of PostgreSQL or RabbitMQ never gets every pod restarted.
- ``GET /readyz`` — readiness: the service's dependencies (database, broker) answer within
  ``CHECK_TIMEOUT_S`` each; ``503`` with the failing ones otherwise. ``GET /healthz`` answers the
  same (the older name, kept: compose health checks and ``make run`` ask it).
- ``GET /metrics`` — here unless ``SIGNOFF_METRICS__PORT`` moves it to a port of its own
  (``Runtime.running`` serves it there); then the public port answers ``404``.

Every service is served by ``run_server``: uvicorn, keeping an idle connection open
``KEEP_ALIVE_S`` — longer than its callers keep one in their pools (httpx: 5 s), so a caller
never sends a request down a connection the service is closing at that very moment (uvicorn's
own default is 5 s too: the two ends racing, a request now and then failed as "server
disconnected").

Every request to the service's own routes is counted by route template, method and status
(``http_metrics``). Every service also refuses oversized bodies (``413``); given its settings,
it limits each person's rate of approval and message requests too (``429``, see ``limits``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from signoff_runtime import http_metrics, limits, problems, tracing
from signoff_runtime.settings import LimitsSettings, ServiceSettings

HealthCheck = Callable[[], Awaitable[bool]]
#: a dependency slower than this is not ready (Kubernetes' probe timeout is 3 s)
CHECK_TIMEOUT_S = 2.0
#: the probes and the scrape: not the service's API, so not counted in its request metrics
STANDARD_PATHS = frozenset({"/livez", "/readyz", "/healthz", "/metrics"})
#: how long a service keeps an idle keep-alive connection: past its callers' pool expiry (httpx:
#: 5 s) and the idle timeout of the proxies put in front (nginx and cloud load balancers: 60 s)
KEEP_ALIVE_S = 75


def server_options(graceful_s: int) -> dict[str, Any]:
    """How every service is served: no WebSocket support loaded (no route needs it; uvicorn
    would import ``websockets``, about 1 MB), logs through ours, idle connections kept
    ``KEEP_ALIVE_S``, in-flight requests given ``graceful_s`` to finish on shutdown."""
    return {
        "log_config": None,
        "ws": "none",
        "timeout_keep_alive": KEEP_ALIVE_S,
        "timeout_graceful_shutdown": graceful_s,
    }


def run_server(app: Starlette, host: str, port: int, *, graceful_s: int, **options: Any) -> None:
    uvicorn.run(app, host=host, port=port, **server_options(graceful_s), **options)


async def _passes(check: HealthCheck) -> bool:
    try:
        return await asyncio.wait_for(check(), CHECK_TIMEOUT_S)
    except Exception:
        return False


def install_standard_routes(
    app: Starlette, checks: dict[str, HealthCheck], settings: ServiceSettings | None = None
) -> None:
    problems.install(app)
    tracing.instrument_app(app, skip=STANDARD_PATHS)
    if settings is not None:
        limits.install(app, settings.auth, settings.limits)
    else:
        app.add_middleware(limits.BodyLimitMiddleware, max_bytes=LimitsSettings().max_body_bytes)
    # outermost: a refused request (413, 429) is counted with its status too
    app.add_middleware(http_metrics.RequestMetricsMiddleware, skip=STANDARD_PATHS)

    async def livez(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def ready(_: Request) -> Response:
        names = list(checks)
        passed = await asyncio.gather(*(_passes(checks[n]) for n in names))
        results = dict(zip(names, passed, strict=True))
        ok = all(results.values())
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "checks": results},
            status_code=200 if ok else 503,
        )

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    # Starlette's own routes, so that a service with no API of its own needs no FastAPI; in a
    # FastAPI app they are left out of the OpenAPI document like any non-API route
    app.add_route("/livez", livez, methods=["GET"], include_in_schema=False)
    app.add_route("/readyz", ready, methods=["GET"], include_in_schema=False)
    app.add_route("/healthz", ready, methods=["GET"], include_in_schema=False)
    if settings is None or settings.metrics.port is None:
        app.add_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
