"""Rendered replies parse as the SDK's own types; streamed chunks assemble with its own
accumulator to the same completion."""

from __future__ import annotations

import json

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from signoff_scripted_model.completions import Rendered, approx_tokens, sse
from signoff_scripted_model.reply import Reply, ToolCall

TWO_CALLS = Reply.calls([("find", {"q": "ünïcode", "n": [1, 2]}), ToolCall("ping")])


def _assembled(rendered: Rendered) -> ChatCompletion:
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in rendered.chunks(include_usage=True):
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    return state.get_final_completion()


def test_text_whole_and_streamed() -> None:
    rendered = Rendered.of("gpt-x", Reply.say("It is  done.\nReally"), prompt_text="x" * 40)

    whole = ChatCompletion.model_validate(rendered.completion())
    streamed = _assembled(rendered)

    for completion in (whole, streamed):
        assert completion.choices[0].message.content == "It is  done.\nReally"
        assert completion.choices[0].finish_reason == "stop"
        assert completion.model == "gpt-x"
    assert whole.usage is not None and whole.usage.prompt_tokens == 10


def test_parallel_tool_calls_whole_and_streamed() -> None:
    rendered = Rendered.of("m", TWO_CALLS, prompt_text="")

    whole = ChatCompletion.model_validate(rendered.completion())
    streamed = _assembled(rendered)

    for completion in (whole, streamed):
        calls = completion.choices[0].message.tool_calls or []
        assert [call.id for call in calls] == list(rendered.call_ids)
        assert [(call.function.name, json.loads(call.function.arguments)) for call in calls] == [  # type: ignore[union-attr]
            ("find", {"q": "ünïcode", "n": [1, 2]}),
            ("ping", {}),
        ]
        assert completion.choices[0].finish_reason == "tool_calls"
    assert len(set(rendered.call_ids)) == 2


def test_raw_argument_text_is_sent_verbatim() -> None:
    rendered = Rendered.of("m", Reply.call("find", '{"q": '), prompt_text="")

    [call] = (
        ChatCompletion.model_validate(rendered.completion()).choices[0].message.tool_calls or []
    )

    assert call.function.arguments == '{"q": '  # type: ignore[union-attr]


def test_usage_chunk_comes_last_with_no_choices() -> None:
    chunks = list(Rendered.of("m", Reply.say("hi"), prompt_text="").chunks(include_usage=True))

    assert all(chunk["usage"] is None for chunk in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 1


def test_sse_frames_end_with_done() -> None:
    frames = list(sse(iter([{"a": 1}])))

    assert frames == [b'data: {"a":1}\n\n', b"data: [DONE]\n\n"]


def test_tokens_are_characters_over_four_rounded_up() -> None:
    assert [approx_tokens("x" * n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
