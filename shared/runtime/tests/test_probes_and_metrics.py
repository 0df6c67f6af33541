"""The standard routes: liveness never asks a dependency, readiness does; request metrics by
route template; ``/metrics`` on its own port when one is set."""

from __future__ import annotations

import httpx
import structlog
from fastapi import FastAPI
from prometheus_client import REGISTRY
from signoff_runtime.http import install_standard_routes
from signoff_runtime.http_metrics import route_of
from signoff_runtime.problems import MEDIA_TYPE
from signoff_runtime.service import Runtime
from signoff_runtime.settings import MetricsSettings, ServiceSettings
from signoff_runtime.testing.processes import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def _app(database_up: bool, settings: ServiceSettings | None = None) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/things/{thing_id}")
    async def thing(thing_id: str) -> dict[str, str]:
        return {"id": thing_id}

    async def database() -> bool:
        if not database_up:
            raise ConnectionRefusedError("PostgreSQL is down")
        return True

    async def broker() -> bool:
        return True

    install_standard_routes(app, {"database": database, "broker": broker}, settings)
    return app


def _client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc")


async def test_a_database_outage_makes_the_service_unready_but_not_dead() -> None:
    async with _client(_app(database_up=False)) as client:
        assert (await client.get("/livez")).status_code == 200
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"] == {"database": False, "broker": True}
        assert (await client.get("/healthz")).status_code == 503
    async with _client(_app(database_up=True)) as client:
        assert (await client.get("/readyz")).status_code == 200


def _count(route: str, status: str) -> float:
    value = REGISTRY.get_sample_value(
        "signoff_http_requests_total", {"method": "GET", "route": route, "status": status}
    )
    return value or 0.0


async def test_requests_are_counted_by_route_template_not_path() -> None:
    template = "/v1/things/{thing_id}"
    before, unmatched, probes = _count(template, "200"), _count("unmatched", "404"), 0.0
    probes = _count("/livez", "200")
    async with _client(_app(database_up=True)) as client:
        for thing in ("a", "b", "c"):
            assert (await client.get(f"/v1/things/{thing}")).status_code == 200
        assert (await client.get("/no/such/path")).status_code == 404
        await client.get("/livez")
    assert _count(template, "200") == before + 3
    assert _count("unmatched", "404") == unmatched + 1
    assert _count("/livez", "200") == probes, "probes are not the API"
    assert _count("/v1/things/a", "200") == 0.0, "a path is never a label"
    seconds = REGISTRY.get_sample_value(
        "signoff_http_request_seconds_count", {"method": "GET", "route": template}
    )
    assert seconds is not None and seconds >= 3
    assert route_of({"type": "http"}) == "unmatched"


async def test_metrics_move_to_their_own_port_when_one_is_set() -> None:
    port = free_port()
    settings = ServiceSettings(metrics=MetricsSettings(port=port))
    async with _client(_app(database_up=True, settings=settings)) as client:
        assert (await client.get("/metrics")).status_code == 404
    async with _client(_app(database_up=True)) as client:
        assert "signoff_http_requests_total" in (await client.get("/metrics")).text
    runtime = Runtime.build("probe", settings)
    server = runtime._serve_metrics()
    assert server is not None
    try:
        async with httpx.AsyncClient() as client:
            scraped = await client.get(f"http://127.0.0.1:{port}/metrics")
        assert scraped.status_code == 200 and "signoff_http_requests_total" in scraped.text
    finally:
        server.shutdown()
        server.server_close()
        await runtime.engine.dispose()


async def test_a_service_without_an_api_serves_the_same_from_starlette_alone() -> None:
    """The executor's and the reconciler's app is Starlette's (no FastAPI in their memory):
    the same probes and scrape, and every error still a problem document."""

    async def fail(_: Request) -> Response:
        raise RuntimeError("a bug")

    async def up() -> bool:
        return True

    app = Starlette(routes=[Route("/fail", fail)])
    install_standard_routes(app, {"database": up})
    async with _client(app) as client:
        assert (await client.get("/livez")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {
            "status": "ok",
            "checks": {"database": True},
        }
        assert "signoff_http_requests_total" in (await client.get("/metrics")).text
        missing = await client.get("/no/such/path")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == MEDIA_TYPE
        assert missing.json()["code"] == "not_found"
    # not cached on this first use: a logger cached here would keep the processors configured
    # now, and a later capture_logs (test_problems.py) would see nothing from it
    previous = structlog.get_config()["cache_logger_on_first_use"]
    structlog.configure(cache_logger_on_first_use=False)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
            base_url="http://svc",
        ) as client:
            failed = await client.get("/fail")
    finally:
        structlog.configure(cache_logger_on_first_use=previous)
    assert failed.status_code == 500
    assert failed.json()["code"] == "internal_error" and "a bug" not in failed.text


async def test_the_probes_stay_out_of_a_fastapi_apps_openapi_document() -> None:
    async with _client(_app(database_up=True)) as client:
        paths = (await client.get("/openapi.json")).json()["paths"]
        assert (await client.get("/healthz")).status_code == 200
    assert list(paths) == ["/v1/things/{thing_id}"]
