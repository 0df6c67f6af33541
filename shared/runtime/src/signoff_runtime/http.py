"""What every HTTP service answers besides its own routes: ``/healthz`` and ``/metrics``.

Every service also refuses oversized bodies (``413``); given its settings, it limits each
person's rate of approval and message requests too (``429``, see ``limits``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from signoff_runtime import limits, problems, tracing
from signoff_runtime.settings import LimitsSettings, ServiceSettings

HealthCheck = Callable[[], Awaitable[bool]]


def install_standard_routes(
    app: FastAPI, checks: dict[str, HealthCheck], settings: ServiceSettings | None = None
) -> None:
    problems.install(app)
    tracing.instrument_app(app)
    if settings is not None:
        limits.install(app, settings.auth, settings.limits)
    else:
        app.add_middleware(limits.BodyLimitMiddleware, max_bytes=LimitsSettings().max_body_bytes)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        results = {}
        for name, check in checks.items():
            try:
                results[name] = await check()
            except Exception:
                results[name] = False
        ok = all(results.values())
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "checks": results},
            status_code=200 if ok else 503,
        )

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
