"""Text holding a NUL character is refused where input enters: PostgreSQL cannot store it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from signoff_contracts.assistants import strict_input
from signoff_contracts.operations import refuse_nul


class Inner(BaseModel):
    names: list[str]


class Asked(BaseModel):
    payment_id: str
    inner: Inner | None = None


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"payment_id": "pay_\x00"}, ("payment_id",)),
        ({"payment_id": "p", "inner": {"names": ["a", "b\x00"]}}, ("inner", "names", 1)),
        ({"payment_id": "p", "bad\x00key": 1}, ("bad\x00key",)),
    ],
)
def test_a_nul_anywhere_is_a_validation_error_at_its_place(
    data: dict[str, Any], loc: tuple[str | int, ...]
) -> None:
    with pytest.raises(ValidationError) as caught:
        refuse_nul(Asked, data)
    [error] = caught.value.errors()
    assert error["type"] == "nul_character" and tuple(error["loc"]) == loc
    with pytest.raises(ValidationError):
        strict_input(Asked, data)


def test_ordinary_text_passes_untouched() -> None:
    data = {"payment_id": "pay_1 \\u0000 as six characters", "inner": {"names": ["é", ""]}}
    refuse_nul(Asked, data)
    assert strict_input(Asked, data).payment_id == data["payment_id"]
