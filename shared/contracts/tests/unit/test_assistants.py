"""The assistant SDK: strict tool schemas from pydantic models, and load-time checks."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from signoff_contracts.assistants import (
    Assistant,
    AssistantDefinitionError,
    NoParameters,
    ProposeTool,
    ReadTool,
    check_assistant,
    strict_input,
    strict_parameters,
)
from signoff_contracts.operations import Scope


class Inner(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str = Field(max_length=10, description="A label.")


class Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    payment_id: str = Field(min_length=1, description="The payment.")
    destination: Literal["card", "credit"]
    note: str | None = Field(default=None, description="Optional note.")
    count: int = 1
    inner: Inner
    tags: list[str] = Field(default_factory=list, max_length=3)


def _objects(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for item in node:
            found += _objects(item)
    return found


def test_every_object_is_closed_and_requires_every_property() -> None:
    schema = strict_parameters(Request)
    objects = _objects(schema)
    assert len(objects) == 2  # the request and the inlined inner model
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])


def test_optional_fields_become_nullable_and_refs_are_inlined() -> None:
    schema = strict_parameters(Request)
    props = schema["properties"]
    assert {"type": "null"} in props["note"]["anyOf"]
    assert {"type": "null"} in props["count"]["anyOf"]
    assert {"type": "null"} in props["tags"]["anyOf"]
    assert "anyOf" not in props["payment_id"]
    assert "$ref" not in str(schema) and "$defs" not in schema
    assert props["destination"]["enum"] == ["card", "credit"]
    assert "title" not in str(schema) and "default" not in str(schema)
    assert "maxLength" not in str(schema) and "minLength" not in str(schema)


def test_a_null_for_an_optional_field_means_not_given() -> None:
    data = {
        "payment_id": "pay_1",
        "destination": "card",
        "note": None,
        "count": None,
        "inner": {"label": "x"},
        "tags": None,
    }
    parsed = strict_input(Request, data)
    assert parsed.count == 1 and parsed.tags == [] and parsed.note is None


def test_strict_input_still_enforces_what_the_schema_cannot_say() -> None:
    with pytest.raises(ValidationError):
        strict_input(Request, {"payment_id": "", "destination": "card", "inner": {"label": "x"}})
    with pytest.raises(ValidationError):
        strict_input(
            Request,
            {"payment_id": "p", "destination": "card", "inner": {"label": "x"}, "amount": 5},
        )
    with pytest.raises(ValidationError):  # a required field's null is not "not given"
        strict_input(Request, {"payment_id": None, "destination": "card", "inner": {"label": "x"}})


class Lookup(ReadTool[NoParameters]):
    name: ClassVar[str] = "lookup"
    description: ClassVar[str] = "Look it up."

    async def run(self, conn: Any, scope: Scope, args: NoParameters) -> dict[str, Any]:
        return {"resource": scope.resource_id}


class Good(Assistant):
    section: ClassVar[str] = "things"
    resource: ClassVar[str] = "thing"
    instructions = {"en": "Help.", "fr": "Aidez."}
    read_tools = (Lookup(),)
    propose_tools = (ProposeTool("propose_thing", "thing.do", "Propose it."),)

    async def exists(self, conn: Any, scope: Scope) -> bool:
        return True

    async def context(self, conn: Any, scope: Scope) -> str:
        return "A thing."


def test_a_complete_assistant_passes() -> None:
    check_assistant(Good)


def test_missing_parts_are_named_at_load_time() -> None:
    class Bad(Assistant):
        section: ClassVar[str] = "Bad Section"
        instructions = {"en": "Only English."}
        propose_tools = (
            ProposeTool("order.refund", "order.refund", "A dotted name."),
            ProposeTool("dup", "a.b", ""),
            ProposeTool("dup", "a.c", ""),
        )

    with pytest.raises(AssistantDefinitionError) as raised:
        check_assistant(Bad)
    message = str(raised.value)
    for part in ("missing `resource`", "lower-case", "'fr'", "'order.refund'", "twice", "exists"):
        assert part in message


def test_a_read_tool_must_forbid_unknown_parameters() -> None:
    class Loose(BaseModel):
        x: int

    class LooseTool(Lookup):
        Parameters = Loose

    class WithLoose(Good):
        read_tools = (LooseTool(),)

    with pytest.raises(AssistantDefinitionError, match="forbid unknown fields"):
        check_assistant(WithLoose)


def test_a_title_when_given_covers_every_locale_and_defaults_to_the_section() -> None:
    class HalfTitled(Good):
        title = {"en": "Things"}

    with pytest.raises(AssistantDefinitionError, match="no title for locale 'fr'"):
        check_assistant(HalfTitled)
    assert Good().title_in("fr") == "things"
