"""Validation errors leave the process as locations, types and messages — never the values."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError
from signoff_runtime.validation import field_errors, problem_errors, summary


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")

    amount: int
    card: str


def _error(data: dict[str, object]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Args.model_validate(data)
    return caught.value


def test_fields_types_and_messages_but_never_the_values() -> None:
    exc = _error({"amount": "secret-value", "card": "4111111111111111", "extra": "pin-1234"})
    described = repr(field_errors(exc)) + summary(exc) + repr(problem_errors(exc))
    for value in ("secret-value", "4111111111111111", "pin-1234"):
        assert value not in described
    assert summary(exc) == "amount: int_parsing; extra: extra_forbidden"
    assert problem_errors(exc)[0] == {
        "loc": ["amount"],
        "msg": "Input should be a valid integer, unable to parse string as an integer",
        "type": "int_parsing",
    }


def test_at_most_limit_errors() -> None:
    exc = _error({})
    assert [e.field for e in field_errors(exc)] == ["amount", "card"]
    assert [e.field for e in field_errors(exc, limit=1)] == ["amount"]
