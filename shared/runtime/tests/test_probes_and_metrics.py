"""The standard routes: liveness never asks a dependency, readiness does; request metrics by
route template; ``/metrics`` on its own port when one is set."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from prometheus_client import REGISTRY
from signoff_runtime.http import install_standard_routes
from signoff_runtime.http_metrics import route_of
from signoff_runtime.service import Runtime
from signoff_runtime.settings import MetricsSettings, ServiceSettings
from signoff_runtime.testing.processes import free_port


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


def _client(app: FastAPI) -> httpx.AsyncClient:
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
