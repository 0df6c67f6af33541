"""The client's protocol, without I/O: each call as data, each answer parsed, retries decided.

The sync and the async clients differ only in how they send; everything they say and read is
here, once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import httpx
from pydantic import BaseModel

from signoff_client.errors import SignoffError, Unavailable, from_problem
from signoff_client.models import ApprovalReply, Operation, Proposal, Proposed

T = TypeVar("T")
Service = Literal["agent", "proposals"]
#: transient answers worth another try (the same Idempotency-Key makes a propose retry safe)
RETRY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request to one of the two services, and how its answer becomes a ``T``."""

    service: Service
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    #: safe to send again after a lost answer (reads; writes keyed or idempotent by design)
    retry: bool = True


def raise_for_problem(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    raise from_problem(response.status_code, problem)


def _parsed(model: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    def parse(response: httpx.Response) -> Any:
        raise_for_problem(response)
        return model.model_validate(response.json())

    return parse


def _operations(response: httpx.Response) -> list[Operation]:
    raise_for_problem(response)
    return [Operation.model_validate(item) for item in response.json()["items"]]


def operations() -> Call[list[Operation]]:
    return Call("agent", "GET", "/v1/operations", _operations)


def operation(kind: str) -> Call[Operation]:
    return Call("agent", "GET", f"/v1/operations/{kind}", _parsed(Operation))


def propose(
    kind: str, resource_id: str, request: BaseModel | dict[str, Any], idempotency_key: str | None
) -> Call[Proposed]:
    body = request.model_dump(mode="json") if isinstance(request, BaseModel) else dict(request)
    # a key of our own when none is given, so the client's own retries never make a second card
    key = idempotency_key or f"signoff-client-{uuid.uuid4()}"
    return Call(
        "agent",
        "POST",
        f"/v1/operations/{kind}/propose",
        _parsed(Proposed),
        json={"resource_id": resource_id, "request": body},
        headers={"Idempotency-Key": key},
    )


def get(proposal_id: str, wait_s: float | None = None, seen: str | None = None) -> Call[Proposal]:
    params: dict[str, Any] = {}
    if wait_s is not None:
        params["wait"] = wait_s
    if seen is not None:
        params["status"] = seen
    return Call(
        "proposals", "GET", f"/v1/proposals/{proposal_id}", _parsed(Proposal), params=params
    )


def decide(
    proposal_id: str, command: Literal["approve", "decline", "withdraw"], reason: str | None
) -> Call[ApprovalReply]:
    body = None if command == "approve" else {"reason": reason}
    # deciding twice answers the same (``already_completed`` or the same refusal): retry-safe
    return Call(
        "proposals", "POST", f"/v1/proposals/{proposal_id}/{command}", _parsed(ApprovalReply), body
    )


def resolve_pause_point(pause_point_id: str, answer: dict[str, Any]) -> Call[ApprovalReply]:
    return Call(
        "proposals",
        "POST",
        f"/v1/pause-points/{pause_point_id}/resolve",
        _parsed(ApprovalReply),
        {k: v for k, v in answer.items() if v is not None},
    )


def should_retry(
    call: Call[Any],
    attempt: int,
    retries: int,
    error: Exception | None,
    response: httpx.Response | None,
) -> bool:
    if not call.retry or attempt >= retries:
        return False
    if error is not None:
        return isinstance(error, httpx.TransportError)
    return response is not None and response.status_code in RETRY_STATUSES


def backoff_s(attempt: int) -> float:
    return float(min(0.2 * 2**attempt, 2.0))


def unreachable(error: Exception) -> SignoffError:
    return Unavailable(503, "unreachable", str(error) or type(error).__name__, {})


@dataclass
class EventReader:
    """Server-sent events, line by line: the last event id, and each ``change`` event's data."""

    last_id: str | None = None
    _data: list[str] = field(default_factory=list)

    def feed(self, lines: Iterable[str]) -> Iterable[dict[str, Any]]:
        for line in lines:
            yield from self.line(line)

    def line(self, line: str) -> list[dict[str, Any]]:
        if line.startswith("id:"):
            self.last_id = line[3:].strip()
        elif line.startswith("data:"):
            self._data.append(line[5:].strip())
        elif line == "" and self._data:
            data, self._data = "\n".join(self._data), []
            return [json.loads(data)]
        return []
