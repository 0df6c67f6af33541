"""Pure probes the checks use: inputs that must be refused, and text that must not leak.

Kept apart from the test class so each probe can be unit-tested without a database, and so an
adopter whose models defeat a probe (a field typed ``str | dict``) can override just that input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from signoff_contracts.operations import RenderedPreview

#: corruption kinds of stored arguments, each of which must fail to parse
CORRUPTIONS = ("unknown_field", "missing_required_field", "wrongly_typed_field", "not_an_object")
_MIN_LEAK_LENGTH = 4


def wrong_value(value: Any) -> Any:
    """A JSON value of another shape than ``value`` that no scalar, list or model accepts."""
    return ["not", "an", "object"] if isinstance(value, dict) else {"not": ["a", "scalar"]}


def typed_fields(model: type[BaseModel], data: dict[str, Any]) -> list[str]:
    """Keys of ``data`` that name a field of ``model`` with a checkable type (not ``Any``)."""
    fields = model.model_fields
    return [key for key in data if key in fields and fields[key].annotation not in (Any, object)]


def wrongly_typed(model: type[BaseModel], data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``data`` with one field at a time replaced by a value of the wrong type, by field."""
    return {key: {**data, key: wrong_value(data[key])} for key in typed_fields(model, data)}


def corrupted(model: type[BaseModel], data: dict[str, Any], kind: str) -> dict[str, Any]:
    """Broken stored forms of valid ``data`` (a model's JSON dump), by a readable name."""
    if kind == "unknown_field":
        return {"extra key": {**data, "__corrupt__": 1}}
    if kind == "missing_required_field":
        required = [name for name, info in model.model_fields.items() if info.is_required()]
        return {f"without {name}": _without(data, name) for name in required}
    if kind == "wrongly_typed_field":
        return {f"{key} mistyped": value for key, value in wrongly_typed(model, data).items()}
    if kind == "not_an_object":
        return {"a list": [data], "a string": json.dumps(data), "null": None}
    raise ValueError(f"unknown corruption kind {kind!r}")


def leaked_request_text(
    request: dict[str, Any], preview: BaseModel, rendered: RenderedPreview
) -> list[str]:
    """Request strings shown in ``rendered`` although the preview does not hold them.

    A rendered preview is the operation's template filled from the preview alone; text the
    model wrote that reached the screen any other way was never frozen, so nobody approved it.
    """
    frozen = [s for s in _strings(preview.model_dump(mode="json"))]
    shown = [rendered.title] + [
        part for line in rendered.lines for part in (line.label, line.value)
    ]
    leaks = []
    for text in set(_strings(request)):
        if len(text) < _MIN_LEAK_LENGTH or any(text in value for value in frozen):
            continue
        if any(text in part for part in shown):
            leaks.append(text)
    return sorted(leaks)


def _without(data: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != name}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
