"""A script's reply in the exact shapes the openai SDK parses: ``ChatCompletion`` whole, or
``ChatCompletionChunk`` pieces for ``stream: true``.

Streaming follows the API: a first chunk with the role, then content pieces (a word at a
time) or, per tool call, one chunk with index/id/type/name and empty arguments followed by
argument fragments; a last chunk with only ``finish_reason``; with
``stream_options.include_usage`` every chunk carries ``usage: null`` and one more chunk with
no choices carries the usage; then ``data: [DONE]``. Token counts are approximate
(characters / 4): enough for code that meters usage, not a tokenizer.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from signoff_scripted_model.reply import Reply

FINGERPRINT = "fp_signoff_scripted"
_ARGUMENT_PIECE = 8
_WORDS = re.compile(r"\s*\S+\s*|\s+")


def approx_tokens(text: str) -> int:
    """Characters / 4, rounded up."""
    return (len(text) + 3) // 4


@dataclass(frozen=True, slots=True)
class Rendered:
    """One reply bound to the ids and counts of one response."""

    model: str
    reply: Reply
    completion_id: str
    created: int
    call_ids: tuple[str, ...]
    prompt_tokens: int

    @classmethod
    def of(cls, model: str, reply: Reply, prompt_text: str) -> Rendered:
        """Fresh ids for this response (tool-call ids are unique per call, as the API's)."""
        return cls(
            model=model,
            reply=reply,
            completion_id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
            created=int(time.time()),
            call_ids=tuple(f"call_{uuid.uuid4().hex[:24]}" for _ in reply.tool_calls),
            prompt_tokens=approx_tokens(prompt_text),
        )

    @property
    def finish_reason(self) -> str:
        """``tool_calls`` or ``stop``."""
        return "tool_calls" if self.reply.tool_calls else "stop"

    def arguments(self) -> list[str]:
        """Each call's arguments as the JSON text sent (raw strings verbatim)."""
        return [
            call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            for call in self.reply.tool_calls
        ]

    def usage(self) -> dict[str, int]:
        """Approximate counts of prompt and completion."""
        produced = (self.reply.text or "") + "".join(
            call.name + text
            for call, text in zip(self.reply.tool_calls, self.arguments(), strict=True)
        )
        completion = approx_tokens(produced)
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": self.prompt_tokens + completion,
        }

    def completion(self) -> dict[str, Any]:
        """The whole ``ChatCompletion``."""
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text, "refusal": None}
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": args},
                }
                for call_id, call, args in zip(
                    self.call_ids, self.reply.tool_calls, self.arguments(), strict=True
                )
            ]
        return {
            **self._head("chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage(),
        }

    def chunks(self, include_usage: bool = False) -> Iterator[dict[str, Any]]:
        """The ``ChatCompletionChunk`` sequence for ``stream: true``."""
        first: dict[str, Any] = {
            "role": "assistant",
            "content": "" if self.reply.text is not None else None,
        }
        deltas = [first, *self._deltas()]
        finals: list[tuple[dict[str, Any], str | None]] = [(delta, None) for delta in deltas] + [
            ({}, self.finish_reason)
        ]
        for delta, finish_reason in finals:
            chunk = {
                **self._head("chat.completion.chunk"),
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            yield {**chunk, "usage": None} if include_usage else chunk
        if include_usage:
            yield {**self._head("chat.completion.chunk"), "choices": [], "usage": self.usage()}

    def _deltas(self) -> Iterator[dict[str, Any]]:
        if self.reply.text is not None:
            for word in _WORDS.findall(self.reply.text):
                yield {"content": word}
            return
        calls = zip(self.call_ids, self.reply.tool_calls, self.arguments(), strict=True)
        for index, (call_id, call, args) in enumerate(calls):
            opening = {"name": call.name, "arguments": ""}
            yield {
                "tool_calls": [
                    {"index": index, "id": call_id, "type": "function", "function": opening}
                ]
            }
            for start in range(0, len(args), _ARGUMENT_PIECE):
                piece = args[start : start + _ARGUMENT_PIECE]
                yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}

    def _head(self, obj: str) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": FINGERPRINT,
        }


def sse(chunks: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    """Server-sent events: one ``data:`` line per chunk, then ``data: [DONE]``."""
    for chunk in chunks:
        yield f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()
    yield b"data: [DONE]\n\n"
