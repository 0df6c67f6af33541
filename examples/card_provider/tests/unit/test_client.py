"""How the client sorts failures: by whether money may have moved. Injected transports only."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from signoff_card_provider.client import (
    CardProviderClient,
    CardProviderError,
    KeyInFlight,
    ProviderRejected,
    ProviderUnavailable,
    ProviderUncertain,
    ResponseLost,
)

REFUND = {
    "id": "re_1",
    "status": "succeeded",
    "payment_ref": "ch_1",
    "amount_cents": 1500,
    "currency": "cad",
    "idempotency_key": "k",
    "created_at": "2026-01-01T00:00:00Z",
}

Handler = Callable[[httpx.Request], httpx.Response]


def problem(status: int, code: str) -> httpx.Response:
    body = {"type": "t", "title": "x", "status": status, "detail": "d", "code": code}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


def raising(exc_type: type[httpx.TransportError]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc_type("boom", request=request)

    return handler


async def refund_with(handler: Handler) -> None:
    transport = httpx.MockTransport(handler)
    async with CardProviderClient("http://provider", transport=transport) as client:
        await client.refund("k", "ch_1", 1500, "cad")


async def test_refund_sends_key_and_body_and_parses_the_refund() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=REFUND)

    async with CardProviderClient("http://provider", transport=httpx.MockTransport(handler)) as c:
        refund = await c.refund("k", "ch_1", 1500, "cad")

    assert refund.id == "re_1" and refund.amount_cents == 1500
    [request] = seen
    assert request.headers["Idempotency-Key"] == "k"
    assert request.url.path == "/v1/refunds"


@pytest.mark.parametrize("exc_type", [httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout])
async def test_nothing_sent_is_certainly_not_applied(exc_type: type[httpx.TransportError]) -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        await refund_with(raising(exc_type))

    assert caught.value.definitely_not_applied is True


@pytest.mark.parametrize(
    "exc_type",
    [httpx.ReadTimeout, httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteTimeout],
)
async def test_sent_without_answer_is_uncertain(exc_type: type[httpx.TransportError]) -> None:
    with pytest.raises(ResponseLost) as caught:
        await refund_with(raising(exc_type))

    assert isinstance(caught.value, ProviderUncertain)
    assert isinstance(caught.value.__cause__, exc_type)


async def test_provider_503_is_certainly_not_applied() -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        await refund_with(lambda _: problem(503, "provider_unavailable"))

    assert caught.value.definitely_not_applied is True


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_other_5xx_is_uncertain_but_not_lost(status: int) -> None:
    with pytest.raises(ProviderUncertain) as caught:
        await refund_with(lambda _: httpx.Response(status, text="proxy says no"))

    assert not isinstance(caught.value, ResponseLost)


async def test_409_is_key_in_flight() -> None:
    with pytest.raises(KeyInFlight):
        await refund_with(lambda _: problem(409, "idempotency_key_in_flight"))


@pytest.mark.parametrize(
    ("status", "code"), [(422, "idempotency_key_reused"), (400, "idempotency_key_missing")]
)
async def test_other_4xx_is_rejected_with_its_code(status: int, code: str) -> None:
    with pytest.raises(ProviderRejected) as caught:
        await refund_with(lambda _: problem(status, code))

    assert (caught.value.code, caught.value.status) == (code, status)
    assert not isinstance(caught.value, ProviderUncertain | KeyInFlight)


async def test_rejection_without_problem_body_still_has_a_code() -> None:
    with pytest.raises(ProviderRejected) as caught:
        await refund_with(lambda _: httpx.Response(418, text="teapot"))

    assert caught.value.code == "http_418"


async def test_lookups_map_missing_to_none_and_failures_to_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/refunds":
            assert request.url.params["idempotency_key"] == "k"
            return httpx.Response(200, json={"items": []})
        return problem(404, "refund_not_found")

    async with CardProviderClient("http://provider", transport=httpx.MockTransport(handler)) as c:
        assert await c.find_by_key("k") is None
        assert await c.get("re_missing") is None

    async with CardProviderClient(
        "http://provider", transport=httpx.MockTransport(raising(httpx.ReadTimeout))
    ) as c:
        with pytest.raises(ProviderUnavailable):
            await c.find_by_key("k")


def test_every_exception_is_a_card_provider_error() -> None:
    for exc_type in (ProviderUncertain, ResponseLost, ProviderUnavailable, KeyInFlight):
        assert issubclass(exc_type, CardProviderError)
    assert issubclass(ProviderRejected, CardProviderError)
