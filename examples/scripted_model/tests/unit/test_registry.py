"""Finding scripts by entry point, and choosing the one that answers."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from signoff_scripted_model import ChatRequest, Reply
from signoff_scripted_model.registry import (
    ENTRY_POINT_GROUP,
    ScriptRegistry,
    UnknownScript,
    selected_name,
)
from signoff_scripted_model.script import ScriptError


class Greeter:
    """A script class; the registry instantiates it."""

    name = "greeter"

    def step(self, request: ChatRequest) -> Reply:
        return Reply.say("hello")


NOT_A_SCRIPT = object()


def _ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_entry_points_load_objects_and_classes_and_remember_failures() -> None:
    registry = ScriptRegistry.from_entry_points(
        [
            _ep("sample", "signoff_scripted_model.samples:LOOKUP_THEN_ACT"),
            _ep("greeter", f"{__name__}:Greeter"),
            _ep("missing", "no_such_module_here:thing"),
            _ep("odd", f"{__name__}:NOT_A_SCRIPT"),
            _ep("echo", f"{__name__}:Greeter"),  # may not replace a built-in
        ]
    )

    assert registry.names() == ["call_first_tool", "echo", "greeter", "sample"]
    assert registry.get("echo").name == "echo"
    assert isinstance(registry.get("greeter"), Greeter)
    assert set(registry.broken()) == {"missing", "odd"}
    with pytest.raises(ScriptError, match="'missing' failed to load: ModuleNotFoundError"):
        registry.get("missing")
    with pytest.raises(UnknownScript):
        registry.get("nobody")


def test_say_takes_everything_after_the_first_colon() -> None:
    script = ScriptRegistry.from_entry_points([]).get("say:a: b")
    request = ChatRequest.from_body({"model": "m", "messages": [{"role": "user", "content": "x"}]})

    assert script.step(request) == Reply.say("a: b")


def test_installed_entry_points_include_the_sample() -> None:
    assert "sample.lookup_then_act" in ScriptRegistry.discover().names()


@pytest.mark.parametrize(
    ("model", "override", "expected"),
    [
        ("gpt-4o", None, "default"),
        ("scripted:club.refund", None, "club.refund"),
        ("scripted:club.refund", "forced", "forced"),
        ("gpt-4o", "forced", "forced"),
    ],
)
def test_override_then_model_then_default(model: str, override: str | None, expected: str) -> None:
    assert selected_name(model, override, "default") == expected
