"""A two-approver card in the browser: two managers in two browser contexts, 1 of 2, then it
runs (Playwright driving Debian's headless Chromium)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from e2e_stack import Stack
from policies_kit import add_manager, set_policy
from signoff_runtime.testing.processes import ServiceProcess
from test_lifecycle import propose_refund
from web_kit import ARGS, CHROMIUM, WAIT_MS, browser_api, new_tab

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


async def test_a_two_approver_card_shows_one_of_two_then_executes(
    browser: Any, web: ServiceProcess, stack: Stack
) -> None:
    club = (await stack.seed())["organizations"][0]
    morgan = club["users"]["manager"]
    token = stack.token(morgan, club)
    await set_policy(stack, token, [{"approvals": 2, "roles": ["manager"]}])
    sam = await add_manager(stack, club, "Sam Roy")
    proposal_id = await propose_refund(stack, club, token)

    first = await new_tab(browser, web)  # a browser context of its own: Morgan's
    await first.sign_in(morgan)
    await first.page.goto(f"{web.url}/inbox")
    card = first.page.locator(f"article[data-card='{proposal_id}']")
    await expect(card.locator("[data-role=approvals]")).to_have_text(
        "Needs 2 approvals: 0 of 2", timeout=WAIT_MS
    )
    await card.get_by_role("button", name="Approve").click()
    await expect(first.page.get_by_role("status")).to_contain_text(
        "waiting for another approver", timeout=WAIT_MS
    )
    card = first.page.locator(f"article[data-card='{proposal_id}']")
    await expect(card.locator("[data-role=approvals]")).to_have_text("Needs 2 approvals: 1 of 2")
    await expect(card.locator("[data-role=waiting]")).to_be_visible()
    await expect(card.get_by_role("button", name="Approve")).to_have_count(0)  # approved once

    second = await new_tab(browser, web)  # Sam, in another context
    await second.sign_in(sam)
    await second.page.goto(f"{web.url}/inbox")
    other = second.page.locator(f"article[data-card='{proposal_id}']")
    await expect(other.locator("[data-role=approvals]")).to_have_text("Needs 2 approvals: 1 of 2")
    await expect(other.locator("[data-role=approvers]")).to_contain_text("Morgan Lee")
    await other.get_by_role("button", name="Approve").click()
    await second.page.goto(f"{web.url}/proposals/{proposal_id}")
    done = second.page.locator(f"article[data-card='{proposal_id}'][data-status=succeeded]")
    await expect(done).to_have_count(1, timeout=WAIT_MS)
    await expect(done.locator("[data-role=approvers]")).to_contain_text("Morgan Lee, Sam Roy")
    refunds = await stack.scalar(
        "SELECT count(*) FROM club.refunds WHERE order_id = :o", o=club["refund_case"]["order_id"]
    )
    assert refunds == 1
