"""The OpenAI-compatible surface: ``POST /v1/chat/completions``, ``GET /v1/models``, and
``GET /healthz``.

A completion request goes: log it → inject the planned fault, if any → parse and check it
as the real API would (400) → select the script (404 ``model_not_found`` when unknown) →
run one step (500 ``script_failed`` when it raises) → render, whole or streamed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from signoff_scripted_model.completions import Rendered, sse
from signoff_scripted_model.errors import openai_error
from signoff_scripted_model.faults import FaultMode, failure_response
from signoff_scripted_model.registry import MODEL_PREFIX, UnknownScript
from signoff_scripted_model.request import ChatRequest, InvalidRequest
from signoff_scripted_model.server import ModelServer
from signoff_scripted_model.validation import check_reply, check_request

router = APIRouter()
log = structlog.get_logger(__name__)
_CREATED = 1_700_000_000


def get_server(request: Request) -> ModelServer:
    """The process's one server state, built by ``create_app``."""
    server: ModelServer = request.app.state.server
    return server


Server = Annotated[ModelServer, Depends(get_server)]


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness, for test fixtures and ``signoff dev run``."""
    return {"status": "ok"}


@router.get("/v1/models")
async def list_models(server: Server) -> dict[str, Any]:
    """``scripted:<name>`` for every loaded script."""
    return {"object": "list", "data": [_model(MODEL_PREFIX + n) for n in server.registry.names()]}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, server: Server) -> JSONResponse:
    """One model; any name is served (by the default script) unless it names no script."""
    name = model_id.removeprefix(MODEL_PREFIX)
    if model_id.startswith(MODEL_PREFIX) and not server.registry.knows(name):
        return _model_not_found(model_id)
    return JSONResponse(_model(model_id))


@router.post("/v1/chat/completions")
async def chat_completions(request: Request, server: Server) -> Response:
    """One assistant turn from the selected script."""
    body = _json_or_text(await request.body())
    stream = isinstance(body, dict) and bool(body.get("stream"))
    entry = server.record(body, stream)
    response = await _answer(server, body, stream, entry)
    entry["status"] = response.status_code
    return response


async def _answer(server: ModelServer, body: Any, stream: bool, entry: dict[str, Any]) -> Response:
    strike = server.faults.next()
    if strike is not None:
        mode, rule = strike
        entry["fault"] = mode.value
        if mode is FaultMode.SLOW:
            await asyncio.sleep(rule.delay_ms / 1000)
        else:
            failure = failure_response(mode, rule, stream)
            if failure is not None:
                return failure
    try:
        chat = ChatRequest.from_body(body)
        check_request(chat)
    except InvalidRequest as exc:
        return openai_error(400, exc.message, "invalid_request_error", param=exc.param)
    entry["script"] = server.script_name(chat)
    try:
        script = server.registry.get(entry["script"])
        reply = server.run(script, chat)
        check_reply(chat, reply)
    except UnknownScript:
        return _model_not_found(chat.model)
    except Exception as exc:  # a script's bug must reach the test as a 500, not a crash
        log.error("script_failed", script=entry["script"], error=f"{type(exc).__name__}: {exc}")
        message = f"script {entry['script']!r} failed: {type(exc).__name__}: {exc}"
        return openai_error(500, message, "server_error", code="script_failed")
    rendered = Rendered.of(chat.model, reply, json.dumps([body.get("messages"), body.get("tools")]))
    entry["response"] = _summary(rendered)
    log.info("chat_completion", script=script.name, stream=stream, finish=rendered.finish_reason)
    if not stream:
        return JSONResponse(rendered.completion())
    options = body.get("stream_options") or {}
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return StreamingResponse(
        _aiter(sse(rendered.chunks(include_usage))), media_type="text/event-stream"
    )


async def _aiter(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _json_or_text(raw: bytes) -> Any:
    """The body as JSON; the text itself when it is not (logged, then answered 400)."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _summary(rendered: Rendered) -> dict[str, Any]:
    calls = zip(rendered.call_ids, rendered.reply.tool_calls, rendered.arguments(), strict=True)
    return {
        "finish_reason": rendered.finish_reason,
        "text": rendered.reply.text,
        "tool_calls": [
            {"id": call_id, "name": call.name, "arguments": arguments}
            for call_id, call, arguments in calls
        ],
    }


def _model(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": _CREATED, "owned_by": "signoff"}


def _model_not_found(model: str) -> JSONResponse:
    return openai_error(
        404,
        f"The model `{model}` does not exist: no such script.",
        "invalid_request_error",
        code="model_not_found",
        param="model",
    )
