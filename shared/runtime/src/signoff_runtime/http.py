"""What every HTTP service answers besides its own routes: ``/healthz`` and ``/metrics``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from signoff_runtime import problems, tracing

HealthCheck = Callable[[], Awaitable[bool]]


def install_standard_routes(app: FastAPI, checks: dict[str, HealthCheck]) -> None:
    problems.install(app)
    app.add_middleware(tracing.HttpTraceMiddleware)

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
