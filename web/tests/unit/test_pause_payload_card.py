"""A pause point's payload on its card: shown as data (escaped), editable while pending, and the
edit is what the person changed — nothing when they left it as it was."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_contracts.operations import Membership
from signoff_web import actions, cards
from signoff_web.context import templates
from signoff_web.sessions import Session

WHO = Session.start(Membership(user_id="u", organization_id="o", role="manager"), 60)
HOSTILE = {"subject": "<script>alert(1)</script>", "note": '"><img src=x onerror=alert(2)>'}


def _view(**changes: Any) -> dict[str, Any]:
    return {
        "id": "pp_1",
        "status": "pending",
        "kind": "approval",
        "title": "Send?",
        "description": "Check",
        "payload": HOSTILE,
        "expires_at": "2030-01-01T00:00:00Z",
        **changes,
    }


def _html(view: dict[str, Any]) -> str:
    card = cards.pause_point(view, WHO)
    template = templates.env.get_template("card.html")
    return template.render(card=card, who=WHO, locale="en", next="/inbox", show_chat_link=False)


def test_a_pending_payload_is_an_escaped_editor_inside_the_answer_form() -> None:
    html = _html(_view())
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'name="payload"' in html and 'data-role="payload"' in html


def test_an_answered_payload_shows_the_edit_as_data() -> None:
    edited = {**HOSTILE, "subject": "<b>final</b>"}
    html = _html(_view(status="resolved", resolution={"action": "approve", "payload": edited}))
    assert 'name="payload"' not in html and "<b>final</b>" not in html
    assert 'data-role="edited-payload"' in html and "&lt;b&gt;final&lt;/b&gt;" in html


def test_only_an_edit_travels_and_it_must_be_an_object() -> None:
    original = {"a": 1}
    assert actions._edited_payload('{"a": 1}', original) is None
    assert actions._edited_payload('{"a": 2}', original) == {"a": 2}
    for bad in ("[1, 2]", "not json"):
        with pytest.raises(ValueError):
            actions._edited_payload(bad, original)
