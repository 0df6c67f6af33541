"""The ways a model endpoint fails, injected into the next chat-completion requests.

One rule at a time (``POST /_admin/faults``), striking the next ``count`` requests
(``null`` = every one until cleared):

================  ==============================================================
``down``          503, the endpoint refuses (``service_unavailable``)
``slow``          waits ``delay_ms``, then answers normally
``garbage``       200 whose body is no chat completion; ``garbage`` picks which:
                  ``truncated`` (JSON cut short), ``html`` (a proxy's page),
                  ``wrong_shape`` (valid JSON, not a completion)
``rate_limited``  429 with ``retry-after: <retry_after_s>``
``server_error``  500 (``server_error``)
================  ==============================================================

Faults touch only ``/v1/chat/completions``; the request is still logged, with its fault.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from signoff_scripted_model.errors import openai_error


class FaultMode(StrEnum):
    """The five failure modes."""

    DOWN = "down"
    SLOW = "slow"
    GARBAGE = "garbage"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"


GarbageKind = Literal["truncated", "html", "wrong_shape"]


class FaultRule(BaseModel):
    """The body of ``POST /_admin/faults``; ``{"mode": null}`` clears."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: FaultMode | None
    count: int | None = Field(default=1, ge=1, description="Requests to strike; null = all.")
    delay_ms: int = Field(default=5000, ge=0, le=600_000, description="Wait of a slow fault.")
    retry_after_s: int = Field(default=1, ge=0, description="retry-after of rate_limited.")
    garbage: GarbageKind = Field(default="truncated", description="Which garbage body.")


class FaultPlan:
    """The current rule and how many strikes it has left."""

    def __init__(self, rule: FaultRule | None = None) -> None:
        self.mode = rule.mode if rule is not None else None
        self.rule = rule if self.mode is not None else None
        self.remaining = rule.count if rule is not None and self.mode is not None else 0
        self.injected = 0

    def next(self) -> tuple[FaultMode, FaultRule] | None:
        """The fault for the request arriving now, consuming one strike."""
        if self.mode is None or self.rule is None or self.remaining == 0:
            return None
        if self.remaining is not None:
            self.remaining -= 1
        self.injected += 1
        return self.mode, self.rule

    def describe(self) -> dict[str, object]:
        """The plan as the admin route shows it."""
        return {
            "rule": self.rule.model_dump(mode="json") if self.rule else None,
            "remaining": self.remaining,
            "injected": self.injected,
        }


_GARBAGE: dict[str, tuple[str, str]] = {
    "truncated": (
        '{"id": "chatcmpl-garbage", "object": "chat.completion", "choices": [{"ind',
        "application/json",
    ),
    "html": ("<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html; charset=utf-8"),
    "wrong_shape": ('{"status": "ok", "result": "not a chat completion"}', "application/json"),
}
_GARBAGE_STREAM: dict[str, tuple[str, str]] = {
    "truncated": ('data: {"id": "chatcmpl-garbage", "choices": [{"del\n\n', "text/event-stream"),
    "html": _GARBAGE["html"],
    "wrong_shape": ('data: {"status": "ok"}\n\ndata: [DONE]\n\n', "text/event-stream"),
}


def failure_response(mode: FaultMode, rule: FaultRule, stream: bool) -> Response | None:
    """The response that replaces the real one; None for ``slow`` (which only waits)."""
    if mode is FaultMode.DOWN:
        return openai_error(
            503, "The scripted model is down (injected fault).", "service_unavailable"
        )
    if mode is FaultMode.SERVER_ERROR:
        return openai_error(500, "The scripted model failed (injected fault).", "server_error")
    if mode is FaultMode.RATE_LIMITED:
        return openai_error(
            429,
            "Rate limit reached (injected fault).",
            "requests",
            code="rate_limit_exceeded",
            headers={"retry-after": str(rule.retry_after_s)},
        )
    if mode is FaultMode.GARBAGE:
        body, media_type = (_GARBAGE_STREAM if stream else _GARBAGE)[rule.garbage]
        return Response(body, status_code=200, media_type=media_type)
    return None
