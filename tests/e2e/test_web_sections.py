"""Every section the agent serves, walked in a browser; live pages updated by push alone.

The sections are discovered from the agent (``GET /v1/sections``), never named here: a section
the club adds is walked by the same test. For each, a manager opens its assistant from the home
page, talks, gets the card the scripted model leads to and approves it, and the outcome arrives
without a reload; meanwhile a French viewer reads the same chat, card and inbox, read-only.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from e2e_stack import Stack
from signoff_runtime.testing.processes import ServiceProcess
from web_kit import (
    ARGS,
    CHROMIUM,
    WAIT_MS,
    Tab,
    browser_api,
    new_tab,
    screenshot,
    set_script,
)

playwright_api = browser_api()

pytestmark = pytest.mark.e2e
expect = playwright_api.expect
POLLED = re.compile(r"/live(\?|$)")


@pytest.fixture(scope="module")
def web(stack: Stack) -> ServiceProcess:
    return stack.start_web()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def browser(web: ServiceProcess) -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield launched
        await launched.close()


@pytest_asyncio.fixture(loop_scope="session")
async def club(stack: Stack) -> dict[str, Any]:
    await set_script(stack, None)  # the club's default: each assistant's demo, by its tools
    return dict((await stack.seed())["organizations"][0])


async def served_sections(stack: Stack, club: dict[str, Any]) -> list[dict[str, Any]]:
    token = stack.token(club["users"]["manager"], club)
    listed = await stack.http.get(f"{stack.url('agent')}/v1/sections", headers=stack.auth(token))
    listed.raise_for_status()
    return list(listed.json()["items"])


async def block_polling(tab: Tab) -> list[str]:
    """Refuse every ``/live`` fetch (the fallback poll) and record the attempts."""
    attempts: list[str] = []

    async def refuse(route: Any) -> None:
        attempts.append(route.request.url)
        await route.abort()

    await tab.page.route(POLLED, refuse)
    return attempts


async def stay_marker(tab: Tab) -> None:
    await tab.page.evaluate("window.__noReload = true")


async def not_reloaded(tab: Tab) -> bool:
    return bool(await tab.page.evaluate("window.__noReload === true"))


async def test_every_served_section_from_home_page_to_outcome_and_read_only_in_french(
    browser: Any, web: ServiceProcess, stack: Stack, club: dict[str, Any]
) -> None:
    sections = await served_sections(stack, club)
    assert len(sections) >= 2  # the club serves orders and email
    manager = await new_tab(browser, web)
    await manager.sign_in(club["users"]["manager"])
    viewer = await new_tab(browser, web, width=390)
    await viewer.sign_in(club["users"]["viewer"])
    await expect(viewer.page.locator("header .who")).to_contain_text("lecteur")
    for section in sections:
        name, heading = section["section"], section["title"]
        await manager.page.goto(f"{web.url}/")
        await expect(manager.page.locator(f"section[data-section='{name}'] h1")).to_have_text(
            heading["en"]
        )
        await manager.open_chat(name, "Please prepare what this needs.")
        pending = manager.card("pending")
        await expect(pending).to_have_count(1, timeout=WAIT_MS)
        await expect(pending.get_by_role("button", name="Approve")).to_have_count(1)
        await screenshot(manager.page, f"card-{name}.png")
        proposal_id = await pending.get_attribute("data-card")
        chat_url = manager.page.url.split("?")[0].split("#")[0]

        # the French viewer: the same section, chat, card and inbox, with nothing to press
        await viewer.page.goto(f"{web.url}/")
        await expect(viewer.page.locator(f"section[data-section='{name}'] h1")).to_have_text(
            heading["fr"]
        )
        await viewer.page.goto(chat_url)
        seen = viewer.page.locator(f"article[data-card='{proposal_id}']")
        await expect(seen).to_have_attribute("data-status", "pending", timeout=WAIT_MS)
        await expect(seen).to_contain_text("seul un gestionnaire peut en décider")
        await expect(seen.get_by_role("button")).to_have_count(0)
        await expect(viewer.page.get_by_label("Message")).to_have_count(0)
        await viewer.page.goto(f"{web.url}/inbox")
        await expect(viewer.page.locator(f"article[data-card='{proposal_id}']")).to_have_count(1)
        await expect(viewer.page.get_by_role("button", name=re.compile("Approuver"))).to_have_count(
            0
        )
        await viewer.page.goto(f"{web.url}/proposals/{proposal_id}")
        await stay_marker(viewer)

        await pending.get_by_role("button", name="Approve").click()
        await manager.page.wait_for_url("**/chat/**notice=claimed**")
        await stay_marker(manager)
        done = manager.page.locator(f"article[data-card='{proposal_id}']")
        await expect(done).to_have_attribute("data-status", "succeeded", timeout=WAIT_MS)
        await expect(done.locator("[data-role=outcome]")).to_contain_text("Done:")
        await expect(done.get_by_role("button", name="Approve")).to_have_count(0)
        said = {"orders": "Done: Refunded 35.00 CAD", "email": "Done: Copied the draft"}[name]
        await expect(done.locator("[data-role=outcome]")).to_contain_text(said)
        follow_up = manager.page.locator("li.msg-app > .md", has_text=said)
        await expect(follow_up).to_have_count(1, timeout=WAIT_MS)
        assert await not_reloaded(manager)
        # the viewer's open proposal page hears it too, in French, without a reload
        shown = viewer.page.locator(f"article[data-card='{proposal_id}']")
        await expect(shown).to_have_attribute("data-status", "succeeded", timeout=WAIT_MS)
        await expect(shown.locator("[data-role=outcome]")).to_contain_text("C'est fait")
        assert await not_reloaded(viewer)
    assert manager.dialogs == [] and viewer.dialogs == []


async def test_chat_and_inbox_receive_updates_by_push_with_polling_blocked(
    browser: Any, web: ServiceProcess, club: dict[str, Any]
) -> None:
    chat = await new_tab(browser, web)
    polled = await block_polling(chat)
    await chat.sign_in(club["users"]["manager"])
    inbox = await new_tab(browser, web)
    polled += await block_polling(inbox)
    await inbox.sign_in(club["users"]["manager"])
    await inbox.page.goto(f"{web.url}/inbox")
    await expect(inbox.page.locator("#live")).to_have_attribute("data-mode", "push")
    await stay_marker(inbox)

    await chat.open_order_chat("Refund the missing discount.")
    await expect(chat.page.locator("#live")).to_have_attribute("data-mode", "push")
    await stay_marker(chat)
    # the card comes at the end of the turn, after the page was shown: pushed, not polled
    card = chat.card("pending")
    await expect(card).to_have_count(1, timeout=WAIT_MS)
    proposal_id = await card.get_attribute("data-card")
    waiting = inbox.page.locator(f"article[data-card='{proposal_id}']")
    await expect(waiting).to_have_count(1, timeout=WAIT_MS)

    await waiting.get_by_role("button", name="Approve").click()
    await inbox.page.wait_for_url("**/inbox?notice=claimed**")
    done = chat.page.locator(f"article[data-card='{proposal_id}'][data-status=succeeded]")
    await expect(done).to_have_count(1, timeout=WAIT_MS)
    assert await not_reloaded(chat)
    assert polled == []


async def test_a_section_the_agent_does_not_serve_is_a_clear_message_with_a_reference(
    browser: Any, web: ServiceProcess, club: dict[str, Any]
) -> None:
    tab = await new_tab(browser, web)
    await tab.sign_in(club["users"]["manager"])
    html = await tab.page.content()
    csrf = html.split('name="csrf" value="')[1].split('"')[0]
    broadcast = club["broadcast_case"]["broadcast_id"]
    # the web's old, hard-coded name for the email section
    refused = await tab.page.request.post(
        f"{web.url}/broadcasts/{broadcast}/chat", form={"csrf": csrf}, max_redirects=0
    )
    assert refused.status == 404
    page = await refused.text()
    assert "This assistant is not available" in page and "Something went wrong" not in page
    reference = page.split('data-role="reference">')[1].split("<")[0]
    assert re.fullmatch(r"[0-9a-f]{32}", reference)
    assert reference in web.log_path.read_text(errors="replace")
