"""The web frontend in a real browser (Playwright driving Debian's headless Chromium).

The whole stack runs as processes (``Stack``) plus the web service; each test signs in as a
seeded person of a fresh club and works only through the pages, as a person would.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from e2e_stack import Stack
from signoff_runtime.testing.processes import ServiceProcess
from sqlalchemy import text
from web_kit import (
    ARGS,
    CHROMIUM,
    WAIT_MS,
    browser_api,
    new_tab,
    screenshot,
    set_script,
)

playwright_api = browser_api()

pytestmark = pytest.mark.e2e
expect = playwright_api.expect


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
    await set_script(stack, None)
    return dict((await stack.seed())["organizations"][0])


async def test_refund_from_chat_to_succeeded(
    browser: Any, web: ServiceProcess, club: dict[str, Any]
) -> None:
    tab = await new_tab(browser, web)
    await tab.sign_in(club["users"]["manager"])
    await tab.open_order_chat("Please refund the discount that was never applied.")
    card = tab.card("pending")
    await expect(card).to_have_count(1, timeout=WAIT_MS)
    preview = card.locator("dl.preview")
    expected = {
        "Participant": "Alex Tremblay",
        "Product": "Adult league — fall season",
        "Missing discount": "Early-bird 10 %",
        "Paid by": "Card",
        "Refund": "35.00 CAD",
        "Refund to": "The card that paid",
        "Order total now": "444.99 CAD",
        "Order total after the refund": "409.99 CAD",
        "Product configuration": "Unchanged since the sale",
    }
    for label, value in expected.items():
        await expect(preview.locator(f"dt:text-is('{label}') + dd")).to_have_text(value)
    await expect(card.locator("time[data-expires]")).to_have_text(
        re.compile(r"^\d+:\d\d"), timeout=5000
    )
    await screenshot(tab.page, "chat.png")
    await card.get_by_role("button", name="Approve").click()
    done = tab.card("succeeded")
    await expect(done).to_have_count(1, timeout=WAIT_MS)
    # the operation's own words for its stored result, not a generic sentence
    await expect(done.locator("[data-role=outcome]")).to_contain_text(
        re.compile(
            r"Done: Refunded 35\.00 CAD to the card ending 4242 \(refund \S+\); "
            r"the order total is now 409\.99 CAD\."
        )
    )
    await expect(done.get_by_role("button", name="Approve")).to_have_count(0)
    # the app's message itself (the card, in the message before it, says the same words)
    follow_up = tab.page.locator(
        "li.msg-app > .md", has_text="Done: Refunded 35.00 CAD to the card ending 4242"
    )
    await expect(follow_up).to_have_count(1, timeout=WAIT_MS)
    assert tab.dialogs == []


async def test_double_click_and_two_tabs_execute_once(
    browser: Any, web: ServiceProcess, stack: Stack, club: dict[str, Any]
) -> None:
    first = await new_tab(browser, web)
    await first.sign_in(club["users"]["manager"])
    await first.open_order_chat("Refund the missing discount please.")
    await expect(first.card("pending")).to_have_count(1, timeout=WAIT_MS)
    chat_url = first.page.url.split("?")[0].split("#")[0]
    second = await new_tab(browser, web)
    await second.sign_in(club["users"]["manager"])
    # the second tab keeps its stale button: its live updates (pushed or polled) are cut off
    await second.page.route(re.compile(r"/(live|events)(\?|$)"), lambda route: route.abort())
    await second.page.goto(chat_url)
    await expect(second.card("pending")).to_have_count(1, timeout=WAIT_MS)
    await first.card("pending").get_by_role("button", name="Approve").dblclick()
    await expect(first.card("succeeded")).to_have_count(1, timeout=WAIT_MS)
    await second.card().get_by_role("button", name="Approve").click()
    await expect(second.page.get_by_role("status")).to_contain_text(
        "Already decided and finished", timeout=WAIT_MS
    )
    await expect(second.card("succeeded")).to_have_count(1, timeout=WAIT_MS)
    refunds = await stack.scalar(
        "SELECT count(*) FROM club.refunds WHERE order_id = :o", o=club["refund_case"]["order_id"]
    )
    assert refunds == 1


async def test_decline_with_reason_and_edit_supersedes(
    browser: Any, web: ServiceProcess, club: dict[str, Any]
) -> None:
    tab = await new_tab(browser, web)
    await tab.sign_in(club["users"]["manager"])
    await tab.open_order_chat("Refund the missing discount.")
    card = tab.card("pending")
    await expect(card).to_have_count(1, timeout=WAIT_MS)
    await card.get_by_label("Reason (optional)").fill("Ask the treasurer first")
    await card.get_by_role("button", name="Decline").click()
    declined = tab.card("declined")
    await expect(declined).to_have_count(1, timeout=WAIT_MS)
    await expect(declined).to_contain_text("Ask the treasurer first")

    await tab.say("Then refund it as account credit.")
    old = tab.card("pending")
    await expect(old).to_have_count(1, timeout=WAIT_MS)
    old_id = await old.get_attribute("data-card")
    await expect(old).to_contain_text("Credit on the participant's account")
    case = club["refund_case"]
    await old.get_by_text("Edit", exact=True).click()
    # the form starts from what was asked: only the destination changes
    await expect(old.get_by_label("Payment Id")).to_have_value(case["payment_id"])
    await expect(old.get_by_label("Line Item Id")).to_have_value(case["line_item_id"])
    await expect(old.get_by_label("Discount Id")).to_have_value(case["discount_id"])
    await expect(old.get_by_label("Destination")).to_have_value("account_credit")
    await old.get_by_label("Destination").select_option("original_payment_method")
    stale_approve = await tab.page.content()  # the old card's form, kept to replay below
    await old.get_by_role("button", name="Prepare a new proposal").click()
    superseded = tab.page.locator(f"article[data-card='{old_id}']")
    await expect(superseded).to_have_attribute("data-status", "superseded", timeout=WAIT_MS)
    await expect(superseded.get_by_role("button", name="Approve")).to_have_count(0)
    fresh = tab.page.locator("article.card[data-status=pending]")
    await expect(fresh).to_have_count(1, timeout=WAIT_MS)
    await expect(fresh).to_contain_text("The card that paid")
    assert await fresh.get_attribute("data-card") != old_id
    # the old card cannot be approved any more, even by a direct post with a valid CSRF token
    csrf = stale_approve.split('name="csrf" value="')[1].split('"')[0]
    response = await tab.page.request.post(
        f"{web.url}/proposals/{old_id}/approve",
        form={"csrf": csrf, "next": "/inbox"},
        max_redirects=0,
    )
    assert response.status == 409
    await expect(superseded).to_have_attribute("data-status", "superseded")


@pytest.mark.parametrize("script", ["club.pause_choice", "club.pause_data_entry"])
async def test_pause_points_resolved_in_browser(
    browser: Any, web: ServiceProcess, stack: Stack, club: dict[str, Any], script: str
) -> None:
    await set_script(stack, script)
    tab = await new_tab(browser, web)
    await tab.sign_in(club["users"]["manager"])
    await tab.open_order_chat("I need to decide something.")
    card = tab.page.locator("article.pause[data-status=pending]")
    await expect(card).to_have_count(1, timeout=WAIT_MS)
    if script == "club.pause_choice":
        # the question waits in the inbox too, and is answered there
        chat = tab.page.url
        await tab.page.goto(f"{web.url}/inbox")
        waiting = tab.page.locator("article.pause[data-status=pending]")
        await expect(waiting).to_have_count(1, timeout=WAIT_MS)
        await waiting.get_by_role("button", name="Account credit").click()
        await expect(tab.page.locator("article.pause")).to_have_count(0, timeout=WAIT_MS)
        await tab.page.goto(chat)
        answer = "Account credit"
    else:
        await card.get_by_label("sessions").fill("-1")  # below the schema's minimum
        await card.get_by_label("season (required)").select_option("winter")
        await card.get_by_role("button", name="Submit").click()
        # validated by the proposals service, which refuses it
        await expect(tab.page.get_by_role("status")).to_contain_text("Not valid", timeout=WAIT_MS)
        card = tab.page.locator("article.pause[data-status=pending]")
        await card.get_by_label("season (required)").select_option("winter")
        await card.get_by_label("sessions").fill("7")
        await card.get_by_role("button", name="Submit").click()
        answer = "winter"
    await expect(tab.page.locator("article.pause[data-status=resolved]")).to_have_count(
        1, timeout=WAIT_MS
    )
    reply = tab.page.locator("li.msg-assistant", has_text="Thank you, I have your answer.")
    await expect(reply).to_have_count(1, timeout=WAIT_MS)
    await expect(reply).to_contain_text(answer)


async def test_viewer_sees_cards_without_approve_and_forged_post_is_refused(
    browser: Any, web: ServiceProcess, stack: Stack, club: dict[str, Any]
) -> None:
    manager = await new_tab(browser, web)
    await manager.sign_in(club["users"]["manager"])
    await manager.open_order_chat("Refund the missing discount.")
    await expect(manager.card("pending")).to_have_count(1, timeout=WAIT_MS)
    proposal_id = await manager.card("pending").get_attribute("data-card")

    viewer = await new_tab(browser, web, width=390)  # a phone-width screen
    await viewer.sign_in(club["users"]["viewer"])
    await viewer.page.goto(f"{web.url}/inbox")
    card = viewer.page.locator(f"article[data-card='{proposal_id}']")
    await expect(card).to_have_count(1)
    await expect(card).to_contain_text("Rembourser une remise oubliée")  # the viewer reads French
    await expect(card.locator("dt:text-is('Remboursement') + dd")).to_have_text("35,00 CAD")
    await expect(card.get_by_role("button")).to_have_count(0)
    await screenshot(viewer.page, "inbox-phone.png")
    html = await viewer.page.content()
    csrf = html.split('name="csrf" value="')[1].split('"')[0]
    forged = await viewer.page.request.post(
        f"{web.url}/proposals/{proposal_id}/approve",
        form={"csrf": csrf, "next": "/inbox"},
        max_redirects=0,
    )
    assert forged.status == 403
    no_csrf = await viewer.page.request.post(
        f"{web.url}/proposals/{proposal_id}/approve", form={"next": "/inbox"}, max_redirects=0
    )
    assert no_csrf.status == 403
    status = await stack.scalar(
        "SELECT status FROM proposals.proposals WHERE id = :p", p=proposal_id
    )
    assert status == "pending"
    await manager.page.goto(f"{web.url}/inbox")
    await expect(manager.page.locator("article.card")).not_to_have_count(0)
    await screenshot(manager.page, "inbox.png")


async def test_markup_from_data_and_model_renders_as_text(
    browser: Any, web: ServiceProcess, stack: Stack, club: dict[str, Any]
) -> None:
    planted = "<img src=x onerror=alert(1)>"
    async with stack.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE club.participants SET name = :n WHERE id = "
                "(SELECT participant_id FROM club.orders WHERE id = :o)"
            ),
            {"n": planted, "o": club["refund_case"]["order_id"]},
        )
    tab = await new_tab(browser, web)
    await tab.sign_in(club["users"]["manager"])
    await tab.open_order_chat("Refund the missing discount.")
    card = tab.card("pending")
    await expect(card).to_have_count(1, timeout=WAIT_MS)
    await expect(card.locator("dt:text-is('Participant') + dd")).to_have_text(planted)
    assert await tab.page.locator("img").count() == 0

    await set_script(stack, "club.pause_approval")
    await tab.say("Check with me first.")
    pause = tab.page.locator("article.pause[data-status=pending]")
    await expect(pause).to_have_count(1, timeout=WAIT_MS)
    script = "<script>alert('model')</script>"
    await pause.get_by_label("Your answer").fill(script)
    await pause.get_by_role("button", name="Approve").click()
    echoed = tab.page.locator("li.msg-assistant", has_text="Thank you, I have your answer.")
    await expect(echoed).to_have_count(1, timeout=WAIT_MS)
    await expect(echoed).to_contain_text(script)
    await expect(tab.page.locator("main script")).to_have_count(0)
    assert tab.dialogs == []


async def test_withdraw_ones_own_card_and_edit_a_pause_points_payload(
    browser: Any, web: ServiceProcess, stack: Stack, club: dict[str, Any]
) -> None:
    tab = await new_tab(browser, web)
    await tab.sign_in(club["users"]["manager"])
    await tab.open_order_chat("Refund the missing discount.")
    card = tab.card("pending")
    await expect(card).to_have_count(1, timeout=WAIT_MS)
    await card.get_by_role("button", name="Withdraw my proposal").click()
    await expect(tab.card("withdrawn")).to_have_count(1, timeout=WAIT_MS)
    told = tab.page.locator("li", has_text="The proposal was withdrawn.")
    await expect(told).to_have_count(1, timeout=WAIT_MS)

    await set_script(stack, "club.pause_approval")
    await tab.say("Check with me first.")
    pause = tab.page.locator("article.pause[data-status=pending]")
    await expect(pause).to_have_count(1, timeout=WAIT_MS)
    editor = pause.get_by_label("Details (you may edit them)")
    await expect(editor).to_contain_text('"topic": "early_bird"')
    await editor.fill('{"topic": "early_bird", "since": "<b>september</b>"}')
    await pause.get_by_role("button", name="Approve").click()
    echoed = tab.page.locator("li.msg-assistant", has_text="Thank you, I have your answer.")
    await expect(echoed).to_have_count(1, timeout=WAIT_MS)
    await expect(echoed).to_contain_text("<b>september</b>")  # the edit, as text
    await expect(tab.page.locator("main b", has_text="september")).to_have_count(0)
    answered = tab.page.locator("article.pause[data-status=resolved] pre.payload")
    await expect(answered.last).to_contain_text("september")
