"""Sessions refuse tampering and expiry; model text never becomes markup."""

from __future__ import annotations

import dataclasses

from signoff_contracts.operations import Membership
from signoff_web import cards, sessions, texts

SECRET = "test-secret"
MEMBER = Membership(user_id="usr_1", organization_id="org_1", role="manager", locale="fr")


def test_session_round_trip_and_tampering() -> None:
    started = sessions.Session.start(MEMBER, 60)
    cookie = sessions.dump(started, SECRET)
    assert sessions.load(cookie, SECRET) == started
    body, _, mac = cookie.rpartition(".")
    forged = dataclasses.replace(started, role="admin")
    assert sessions.load(sessions.dump(forged, "other-secret"), SECRET) is None
    assert sessions.load(body + ".x" + mac[2:], SECRET) is None
    expired = dataclasses.replace(started, exp=1)
    assert sessions.load(sessions.dump(expired, SECRET), SECRET) is None


def test_csrf_must_match_the_session() -> None:
    started = sessions.Session.start(MEMBER, 60)
    assert sessions.csrf_ok(started, started.csrf)
    assert not sessions.csrf_ok(started, "")
    assert not sessions.csrf_ok(started, started.csrf + "x")


def test_markdown_escapes_html_and_drops_script_links() -> None:
    html = str(cards.markdown("**bold** <script>alert(1)</script> [x](javascript:alert(1))"))
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html


def test_money_per_locale() -> None:
    assert texts.money(123450, "CAD", "en") == "1,234.50 CAD"
    assert texts.money(123450, "CAD", "fr") == "1\u202f234,50 CAD"
