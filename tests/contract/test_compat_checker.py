"""The compatibility checker on small before/after models: each rule passes or fails as stated."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from .compat import Change, breaking_changes, compare_sets, report


def _changes(old: type[BaseModel], new: type[BaseModel]) -> list[Change]:
    return breaking_changes(old.model_json_schema(), new.model_json_schema(), "Msg")


def _kinds(old: type[BaseModel], new: type[BaseModel]) -> set[tuple[str, str]]:
    return {(change.path, change.kind) for change in _changes(old, new)}


class Base(BaseModel):
    model_config = ConfigDict(extra="ignore")
    version: int = 1
    name: str
    note: str | None = None
    status: Literal["open", "closed", "archived"] = "open"
    tags: list[str] = []


# -- allowed -----------------------------------------------------------------------------------


def test_identical_schemas_are_compatible() -> None:
    assert _changes(Base, Base) == []


def test_adding_an_optional_field_is_allowed() -> None:
    class New(Base):
        reason: str | None = None

    assert _changes(Base, New) == []


def test_documentation_changes_are_allowed() -> None:
    class New(Base):
        name: str = Field(description="Who it is.", title="The Name")

    assert _changes(Base, New) == []


def test_adding_a_message_type_is_allowed_and_removing_one_is_not() -> None:
    old = {"a": Base.model_json_schema()}
    assert compare_sets(old, {**old, "b": Base.model_json_schema()}) == {}
    assert [c.kind for c in compare_sets(old, {})["a"]] == ["message_removed"]


def test_a_new_version_is_not_compared() -> None:
    class V2(BaseModel):
        version: int = 2
        renamed: int

    assert _changes(Base, V2) == []


# -- breaking ----------------------------------------------------------------------------------


def test_removing_a_field_breaks() -> None:
    class New(BaseModel):
        version: int = 1
        name: str
        status: Literal["open", "closed", "archived"] = "open"
        tags: list[str] = []

    assert _kinds(Base, New) == {("Msg.note", "removed")}


def test_renaming_a_field_breaks_as_removal_plus_addition() -> None:
    class New(BaseModel):
        version: int = 1
        full_name: str
        note: str | None = None
        status: Literal["open", "closed", "archived"] = "open"
        tags: list[str] = []

    assert _kinds(Base, New) == {("Msg.name", "removed"), ("Msg.full_name", "added_required")}


@pytest.mark.parametrize(
    ("annotation", "detail"),
    [
        (int, "string → integer"),
        (str | None, "string → string | null"),
        (list[str], "string → array of string"),
    ],
)
def test_changing_a_field_type_breaks(annotation: Any, detail: str) -> None:
    New = type("New", (Base,), {"__annotations__": {"name": annotation}})
    [change] = _changes(Base, New)
    assert (change.path, change.kind) == ("Msg.name", "type_changed")
    assert detail in change.detail


def test_removing_null_from_an_optional_field_breaks() -> None:
    class New(Base):
        note: str = ""

    assert ("Msg.note", "type_changed") in _kinds(Base, New)


def test_making_an_optional_field_required_breaks() -> None:
    class New(Base):
        tags: list[str]

    assert _kinds(Base, New) == {("Msg.tags", "made_required")}


def test_adding_a_required_field_breaks() -> None:
    class New(Base):
        amount: int

    assert _kinds(Base, New) == {("Msg.amount", "added_required")}


def test_narrowing_a_literal_breaks() -> None:
    class New(Base):
        status: Literal["open", "closed"] = "open"

    [change] = _changes(Base, New)
    assert (change.path, change.kind) == ("Msg.status", "enum_narrowed")
    assert "archived" in change.detail


def test_widening_a_literal_breaks_old_readers() -> None:
    class New(Base):
        status: Literal["open", "closed", "archived", "deleted"] = "open"  # type: ignore[assignment]

    assert _kinds(Base, New) == {("Msg.status", "enum_widened")}


def test_tightening_a_constraint_breaks() -> None:
    class New(Base):
        name: Annotated[str, Field(max_length=10)]

    [change] = _changes(Base, New)
    assert (change.path, change.kind) == ("Msg.name", "constraint_changed")
    assert "maxLength" in change.detail


def test_changing_a_default_breaks() -> None:
    class New(Base):
        status: Literal["open", "closed", "archived"] = "closed"

    assert _kinds(Base, New) == {("Msg.status", "default_changed")}


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: int


class Outer(BaseModel):
    version: int = 1
    inner: Inner | None = None
    items: list[Inner] = []


def test_changes_inside_nested_models_name_the_full_path() -> None:
    class Inner(BaseModel):  # same title, new field type
        model_config = ConfigDict(extra="forbid")
        amount: str

    class New(BaseModel):
        version: int = 1
        inner: Inner | None = None
        items: list[Inner] = []

    assert _kinds(Outer, New) == {
        ("Msg.inner.amount", "type_changed"),
        ("Msg.items[].amount", "type_changed"),
    }


def test_an_optional_field_added_to_a_closed_object_breaks() -> None:
    class Inner(BaseModel):
        model_config = ConfigDict(extra="forbid")
        amount: int
        currency: str = "EUR"

    class New(BaseModel):
        version: int = 1
        inner: Inner | None = None
        items: list[Inner] = []

    assert ("Msg.inner.currency", "closed_object_grew") in _kinds(Outer, New)


class A(BaseModel):
    type: Literal["a"] = "a"
    x: int


class B(BaseModel):
    type: Literal["b"] = "b"
    y: int


class C(BaseModel):
    type: Literal["c"] = "c"


class Tagged(BaseModel):
    version: int = 1
    body: Annotated[A | B, Field(discriminator="type")]


def test_union_members_added_or_removed_break() -> None:
    class Wider(BaseModel):
        version: int = 1
        body: Annotated[A | B | C, Field(discriminator="type")]

    class Narrower(BaseModel):
        version: int = 1
        body: A

    assert _kinds(Tagged, Wider) == {("Msg.body", "type_changed")}
    assert "now also accepts object C" in _changes(Tagged, Wider)[0].detail
    assert _kinds(Tagged, Narrower) == {("Msg.body", "type_changed")}


class Node(BaseModel):
    version: int = 1
    label: str
    children: list[Node] = []


def test_recursive_models_terminate() -> None:
    assert _changes(Node, Node) == []


def test_the_report_names_field_and_fix() -> None:
    class New(Base):
        tags: list[str]

    text = report("proposal.event", _changes(Base, New), "v1/proposal.event.json", "make x")
    assert "Msg.tags: optional field made required" in text
    assert "new version package" in text and "re-export: make x" in text
