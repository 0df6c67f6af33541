"""The model, behind a small protocol: messages and tools in, text or tool calls out.

The only implementation that talks to a network is ``OpenAIChatModel`` (the openai SDK's
``AsyncOpenAI`` against any OpenAI-compatible endpoint); tests inject their own ``ChatModel``.
Every failure — an endpoint down, slow past its timeout, rate limiting or erroring beyond the
SDK's bounded retries, or answering something that is not a chat completion — becomes one
``ModelUnavailable`` with a code the person can be told, never a stack trace.

Endpoint: ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the SDK reads them; without
``OPENAI_BASE_URL`` the scripted model server (``SIGNOFF_AGENT__SCRIPTED_MODEL_URL``), which
needs no key.

The SDK is imported by the first turn that asks the model, not at start: ``openai`` imports all
of its API's types eagerly (≈ 14 MB and 0.6 s here), which an agent serving only streams,
conversations' reads or proposals made without a model never needs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from signoff_agent.metrics import MODEL_CALLS, MODEL_TOKENS
from signoff_agent.settings import AgentGroup

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One assistant turn of the model: text, or tool calls (then ``content`` is ignored)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()


class ModelUnavailable(Exception):
    """No usable answer: ``code`` is ``model_timeout``, ``model_rate_limited``,
    ``model_unavailable`` or ``model_bad_response``."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class ChatModel(Protocol):
    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply: ...


class OpenAIChatModel:
    def __init__(self, client: AsyncOpenAI, model: str) -> None:
        self._client = client
        self._model = model

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        import openai  # the client was made with it: imported already, a lookup

        try:
            completion = await self._client.chat.completions.create(
                model=self._model,
                messages=messages,  # type: ignore[arg-type]
                tools=tools or openai.omit,  # type: ignore[arg-type]
                parallel_tool_calls=False if tools else openai.omit,
            )
        except openai.APITimeoutError:
            raise _unavailable("model_timeout") from None
        except openai.RateLimitError:
            raise _unavailable("model_rate_limited") from None
        except (openai.APIConnectionError, openai.InternalServerError):
            raise _unavailable("model_unavailable") from None
        except openai.APIStatusError as exc:
            log.warning("model.refused", status=exc.status_code)
            raise _unavailable("model_unavailable") from None
        except (openai.APIError, ValueError, TypeError, KeyError):
            raise _unavailable("model_bad_response") from None
        reply = _reply(completion)
        MODEL_CALLS.labels(result="ok").inc()
        _count_tokens(completion)
        return reply


def _count_tokens(completion: Any) -> None:
    usage = getattr(completion, "usage", None)
    for kind in ("prompt", "completion"):
        count = getattr(usage, f"{kind}_tokens", None)
        if isinstance(count, int) and count > 0:
            MODEL_TOKENS.labels(kind=kind).inc(count)


def _unavailable(code: str) -> ModelUnavailable:
    MODEL_CALLS.labels(result=code).inc()
    return ModelUnavailable(code)


def _reply(completion: Any) -> ModelReply:
    """Check the shape ourselves: a lenient SDK parse may hand back a hollow object."""
    try:
        message = completion.choices[0].message
        calls = tuple(
            ToolCall(id=str(call.id), name=str(call.function.name), arguments=_text(call))
            for call in (message.tool_calls or ())
        )
        content = message.content
    except (AttributeError, IndexError, TypeError):
        raise _unavailable("model_bad_response") from None
    if not calls and not (isinstance(content, str) and content.strip()):
        raise _unavailable("model_bad_response")
    return ModelReply(content=content if isinstance(content, str) else None, tool_calls=calls)


def _text(call: Any) -> str:
    arguments = call.function.arguments
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


class _Deferred:
    """A ``ChatModel`` made by ``build`` at its first call (the module docstring says why)."""

    def __init__(self, build: Callable[[], ChatModel]) -> None:
        self._build = build
        self._model: ChatModel | None = None

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        if self._model is None:
            self._model = self._build()
        return await self._model.complete(messages, tools)


def build_model(group: AgentGroup) -> ChatModel:
    """The SDK client as the SDK configures itself, falling back to the scripted server."""
    real = os.environ.get("OPENAI_BASE_URL")

    def build() -> ChatModel:
        from openai import AsyncOpenAI

        client = AsyncOpenAI(
            base_url=real or group.scripted_model_url,
            api_key=os.environ.get("OPENAI_API_KEY") or ("unused" if not real else None),
            timeout=group.model_timeout_s,
            max_retries=group.model_max_retries,
        )
        return OpenAIChatModel(client, group.model)

    log.info("model.configured", endpoint="configured" if real else "scripted", model=group.model)
    return _Deferred(build)
