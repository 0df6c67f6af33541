"""Model-written links: another site's address is shown in full and opened only after a
confirmation page of the web's own; a same-site path stays a plain link."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest
from signoff_web import cards
from signoff_web.app import create_app
from signoff_web.settings import WebSettings

HREF = re.compile(r'href="([^"]*)"')


def test_a_link_to_another_site_goes_through_the_leave_page_with_its_destination_shown() -> None:
    html = str(cards.markdown("Your [refund status](https://evil.example/pay?x=1) is ready."))
    assert HREF.findall(html) == [f"/leave?to={quote('https://evil.example/pay?x=1', safe='')}"]
    assert "(https://evil.example/pay?x=1)" in html  # the destination itself, beside the text
    assert 'rel="nofollow noopener noreferrer"' in html


def test_a_look_alike_host_shows_as_punycode() -> None:
    html = str(cards.markdown("[bank](https://p\u0430ypal.example/)"))  # a Cyrillic a (U+0430)
    assert "(https://xn--pypal-4ve.example/)" in html
    assert "p\u0430ypal" not in html


@pytest.mark.parametrize(
    "link",
    [
        "[x](//evil.example/path)",  # scheme-relative: another host
        "<https://evil.example/a>",  # an autolink
        "[x](http://127.0.0.1:9/)",
        "[x](mailto:someone@evil.example)",
        "[x](HTTPS://EVIL.EXAMPLE)",
    ],
)
def test_no_live_link_to_another_site_in_any_form(link: str) -> None:
    html = str(cards.markdown(link))
    assert HREF.findall(html), html
    assert all(href.startswith("/leave?to=") for href in HREF.findall(html)), html


def test_same_site_links_stay_live_and_unsafe_ones_stay_text() -> None:
    html = str(cards.markdown("[chat](/chat/cnv_1) [top](#end) [js](javascript:alert(1))"))
    assert HREF.findall(html) == ["/chat/cnv_1", "#end"]
    assert "javascript" not in "".join(HREF.findall(html))
    # an autolink's text is its destination already: not printed twice
    once = str(cards.markdown("<https://example.org/a>"))
    assert once.count("https://example.org/a<") == 1 and "destination" not in once


def test_pause_point_descriptions_get_the_same_treatment() -> None:
    from signoff_contracts.operations import Membership
    from signoff_web.sessions import Session

    who = Session.start(Membership(user_id="u", organization_id="o", role="manager"), 60)
    view = {
        "id": "pp_1",
        "status": "pending",
        "kind": "approval",
        "title": "t",
        "description": "See [the form](https://evil.example/form).",
        "expires_at": "2030-01-01T00:00:00Z",
    }
    html = str(cards.pause_point(view, who)["description"])
    assert HREF.findall(html) == [f"/leave?to={quote('https://evil.example/form', safe='')}"]


async def test_the_leave_page_shows_the_full_address_and_asks() -> None:
    app = create_app(WebSettings(env="test"))
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
            target = "https://evil.example/pay?next=/chat&x=<b>"
            page = await client.get("/leave", params={"to": target})
            bad = await client.get("/leave", params={"to": "javascript:alert(1)"})
    finally:  # its lifespan never ran: nothing else closes its pool
        await app.state.runtime.engine.dispose()
    assert page.status_code == 200 and "location" not in page.headers  # never a redirect
    assert "evil.example" in page.text
    assert "https://evil.example/pay?next=/chat&amp;x=&lt;b&gt;" in page.text
    assert 'href="https://evil.example/pay?next=/chat&amp;x=&lt;b&gt;"' in page.text
    assert bad.status_code == 400 and 'href="javascript' not in bad.text
