"""The async client the domain refunds through, with failures sorted by what they prove.

What matters after a failed refund is not *that* it failed but whether money may have
moved. The exceptions say exactly that::

    CardProviderError                  — anything this client raises
    ├── ProviderUncertain              — the refund may or may not have been applied
    │   │                                (raised as such for a 5xx other than a 503
    │   │                                ``provider_unavailable``); never replay after
    │   │                                the retention window — look it up (find_by_key)
    │   └── ResponseLost               — sent, no answer at all: connection dropped or
    │                                    reset, read or write timeout
    ├── ProviderUnavailable            — not done; ``definitely_not_applied`` is True when
    │                                    nothing was sent (connect error/timeout, pool
    │                                    timeout) or the provider said so (503
    │                                    ``provider_unavailable``); lookups raise it too
    ├── KeyInFlight                    — 409: same key still being processed; retry later
    └── ProviderRejected               — any other 4xx; ``code`` is the problem code
                                         (``idempotency_key_reused``, ``invalid_request``…)

Inject ``transport`` (``httpx.MockTransport``, ``httpx.ASGITransport``) in tests rather
than patching.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal, Self

import httpx
from pydantic import AwareDatetime, BaseModel, ConfigDict

# Raised before a byte of the request could have reached the provider.
_NOTHING_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class Refund(BaseModel):
    """A refund as the provider reported it."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: Literal["succeeded"]
    payment_ref: str
    amount_cents: int
    currency: str
    idempotency_key: str
    created_at: AwareDatetime


class CardProviderError(Exception):
    """Base of everything ``CardProviderClient`` raises."""


class ProviderUncertain(CardProviderError):
    """The request may have been applied; only a lookup can tell."""


class ResponseLost(ProviderUncertain):
    """The request went out and no usable answer came back."""


class ProviderUnavailable(CardProviderError):
    """The provider could not be reached or refused to work."""

    def __init__(self, message: str, *, definitely_not_applied: bool) -> None:
        super().__init__(message)
        self.definitely_not_applied = definitely_not_applied


class KeyInFlight(CardProviderError):
    """Another request with this idempotency key is still being processed."""


class ProviderRejected(CardProviderError):
    """The provider refused the request (4xx other than 409)."""

    def __init__(self, code: str, status: int, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.code = code
        self.status = status
        self.detail = detail


class CardProviderClient:
    """``async with CardProviderClient(url) as provider: await provider.refund(...)``."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout_s, transport=transport)

    async def __aenter__(self) -> Self:
        await self._http.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._http.__aexit__(exc_type, exc, traceback)

    async def aclose(self) -> None:
        """Close the connection pool (when not used as a context manager)."""
        await self._http.aclose()

    async def refund(
        self, idempotency_key: str, payment_ref: str, amount_cents: int, currency: str
    ) -> Refund:
        """Create a refund once per key; a replay within the window returns the first."""
        body = {"payment_ref": payment_ref, "amount_cents": amount_cents, "currency": currency}
        headers = {"Idempotency-Key": idempotency_key}
        try:
            response = await self._http.post("/v1/refunds", json=body, headers=headers)
        except _NOTHING_SENT as exc:
            raise ProviderUnavailable(_describe(exc), definitely_not_applied=True) from exc
        except httpx.TransportError as exc:
            raise ResponseLost(_describe(exc)) from exc
        _raise_for_refund(response)
        return Refund.model_validate_json(response.content)

    async def find_by_key(self, idempotency_key: str) -> Refund | None:
        """The first refund made with this key, at any age; None if there is none."""
        refunds = await self.list_refunds(idempotency_key=idempotency_key)
        return refunds[0] if refunds else None

    async def list_refunds(
        self, *, idempotency_key: str | None = None, payment_ref: str | None = None
    ) -> list[Refund]:
        """Every refund matching the filters, oldest first (a duplicate shows up here)."""
        params = {"idempotency_key": idempotency_key, "payment_ref": payment_ref}
        filters = {name: value for name, value in params.items() if value is not None}
        data = await self._get_json("/v1/refunds", params=filters)
        return [Refund.model_validate(item) for item in data["items"]]

    async def get(self, refund_id: str) -> Refund | None:
        """One refund by id; None if the provider has no such refund."""
        try:
            data = await self._get_json(f"/v1/refunds/{refund_id}")
        except ProviderRejected as exc:
            if exc.status == 404:
                return None
            raise
        return Refund.model_validate(data)

    async def ledger(self) -> dict[str, Any]:
        """The simulator's effect ledger (tests count effects and request kinds)."""
        return await self._get_json("/v1/ledger")

    async def _get_json(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        """GET for a lookup: it changes nothing, so any failure is plain unavailability."""
        try:
            response = await self._http.get(path, params=params)
        except httpx.TransportError as exc:
            raise ProviderUnavailable(_describe(exc), definitely_not_applied=True) from exc
        if response.status_code >= 500:
            raise ProviderUnavailable(_status_line(response), definitely_not_applied=True)
        if response.status_code >= 400:
            raise _rejected(response)
        data: dict[str, Any] = response.json()
        return data


def _raise_for_refund(response: httpx.Response) -> None:
    """Map a create's non-2xx answer onto the exception tree."""
    status = response.status_code
    if status < 400:
        return
    if status == 409:
        raise KeyInFlight(_status_line(response))
    if status < 500:
        raise _rejected(response)
    if status == 503 and _problem(response).get("code") == "provider_unavailable":
        raise ProviderUnavailable(_status_line(response), definitely_not_applied=True)
    raise ProviderUncertain(f"{_status_line(response)}: the provider may have applied it")


def _rejected(response: httpx.Response) -> ProviderRejected:
    problem = _problem(response)
    code = str(problem.get("code") or f"http_{response.status_code}")
    return ProviderRejected(code, response.status_code, str(problem.get("detail", "")))


def _problem(response: httpx.Response) -> dict[str, Any]:
    """The problem document, or {} when the body is not one (e.g. from a proxy)."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _status_line(response: httpx.Response) -> str:
    problem = _problem(response)
    detail = problem.get("detail") or response.reason_phrase
    return f"{response.status_code} {problem.get('code', '')}: {detail}".replace(" :", ":")


def _describe(exc: httpx.TransportError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
