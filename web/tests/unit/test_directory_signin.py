"""The web signs people in through the ``signoff.directory`` entry point's ``SignIn`` part
(``signoff_contracts.operations``): any domain's directory that has it will do, one without it
is refused at start-up, not at the first sign-in."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_contracts.operations import Membership
from signoff_web.app import create_app
from signoff_web.settings import WebSettings


class Members:
    async def membership(self, conn: Any, user_id: str, organization_id: str) -> None:
        return None

    async def memberships(self, conn: Any, user_id: str) -> list[Membership]:
        return []


class SignsIn(Members):
    async def authenticate(self, conn: Any, email: str, password: str) -> None:
        return None


def test_a_directory_that_signs_people_in_is_taken() -> None:
    app = create_app(WebSettings(env="test"), directory=SignsIn())
    assert isinstance(app.state.directory, SignsIn)


def test_a_directory_without_authenticate_is_refused_at_start_up() -> None:
    with pytest.raises(RuntimeError, match="cannot sign people in"):
        create_app(WebSettings(env="test"), directory=Members())  # type: ignore[arg-type]
