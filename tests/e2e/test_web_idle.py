"""Idle open pages cost the APIs nothing: live pages are pushed, not polled (docs/web.md).

Chat, inbox and proposal pages are opened in Chromium and left alone for a window; a counting
proxy between the web and each API sees every request the web makes. With event streams, the
window holds none — only the streams' keep-alives. The default size is small (part of
``make test``); ``SIGNOFF_WEB_IDLE_PAGES`` / ``SIGNOFF_WEB_IDLE_S`` give the documented
measurement (50 pages, 60 s), and ``SIGNOFF_WEB_IDLE_WEB_SRC`` runs another web's source (the
polling one, for the "before" figure: nothing is asserted then, only reported).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from counting_proxy import CountingProxy
from e2e_stack import Stack
from signoff_runtime.testing.processes import ServiceProcess, service
from web_kit import ARGS, CHROMIUM, browser_api

playwright_api = browser_api()

pytestmark = pytest.mark.e2e
PAGES = int(os.environ.get("SIGNOFF_WEB_IDLE_PAGES", "6"))
IDLE_S = float(os.environ.get("SIGNOFF_WEB_IDLE_S", "20"))
OTHER_WEB = os.environ.get("SIGNOFF_WEB_IDLE_WEB_SRC")
PAGES_PER_CONTEXT = 5  # below a browser's six connections per host: each stream holds one


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def proxies(stack: Stack) -> AsyncIterator[dict[str, CountingProxy]]:
    found = {name: CountingProxy(stack.url(name)) for name in ("agent", "proposals")}
    tasks = {name: await proxy.start() for name, proxy in found.items()}
    yield found
    for name, proxy in found.items():
        await proxy.stop(tasks[name])


@pytest.fixture(scope="module")
def web(stack: Stack, proxies: dict[str, CountingProxy]) -> ServiceProcess:
    env = {
        **stack.env,
        "SIGNOFF_WEB__AGENT_URL": proxies["agent"].url,
        "SIGNOFF_WEB__PROPOSALS_URL": proxies["proposals"].url,
    }
    if OTHER_WEB:
        env["PYTHONPATH"] = os.pathsep.join([OTHER_WEB, os.environ.get("PYTHONPATH", "")])
    proc = service("web", env, stack.log_dir)
    stack.processes["web"] = proc.start()
    proc.wait_healthy(60.0)
    return proc


async def _pending_card(stack: Stack, club: dict[str, Any]) -> tuple[str, str]:
    """A conversation holding a pending card, made through the agent's API (any web will do)."""
    token = stack.token(club["users"]["manager"], club)
    agent = stack.url("agent")
    opened = await stack.http.post(
        f"{agent}/v1/conversations",
        json={"section": "orders", "resource_id": club["refund_case"]["order_id"]},
        headers=stack.auth(token),
    )
    conversation = opened.json()["id"]
    said = await stack.http.post(
        f"{agent}/v1/conversations/{conversation}/messages",
        json={"content": "Refund the missing discount."},
        headers=stack.auth(token),
        timeout=60.0,
    )
    proposal = next(m["proposal_id"] for m in said.json()["messages"] if m.get("proposal_id"))
    return conversation, proposal


async def test_idle_live_pages_make_no_api_requests(
    stack: Stack, web: ServiceProcess, proxies: dict[str, CountingProxy]
) -> None:
    club = dict((await stack.seed())["organizations"][0])
    conversation, proposal = await _pending_card(stack, club)
    urls = [f"/chat/{conversation}", "/inbox", f"/proposals/{proposal}"]
    manager = club["users"]["manager"]
    browser_requests: list[float] = []
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        pages = []
        for first in range(0, PAGES, PAGES_PER_CONTEXT):
            context = await browser.new_context()
            context.on("request", lambda _: browser_requests.append(time.monotonic()))
            signin = await context.new_page()
            await signin.goto(f"{web.url}/signin")
            await signin.get_by_label("Email").fill(manager["email"])
            await signin.get_by_label("Password").fill(manager["password"])
            await signin.get_by_role("button", name="Sign in").click()
            await signin.wait_for_url(f"{web.url}/")
            await signin.close()
            for i in range(first, min(first + PAGES_PER_CONTEXT, PAGES)):
                page = await context.new_page()
                await page.goto(f"{web.url}{urls[i % len(urls)]}")
                pages.append(page)
        if not OTHER_WEB:  # every page follows its stream before the window opens
            for page in pages:
                live = page.locator("#live")
                await playwright_api.expect(live).to_have_attribute("data-mode", "push")
        start = time.monotonic()
        await asyncio.sleep(IDLE_S)  # the measurement window itself: idle pages
        end = time.monotonic()
        await browser.close()
    figures = {
        "web": "other" if OTHER_WEB else "this",
        "pages": PAGES,
        "seconds": IDLE_S,
        "agent_requests": dict(proxies["agent"].counted(start, end)),
        "proposals_requests": dict(proxies["proposals"].counted(start, end)),
        "upstream_keepalives": sum(p.keepalives_between(start, end) for p in proxies.values()),
        "browser_requests": sum(1 for at in browser_requests if start <= at < end),
    }
    print("web-idle " + json.dumps(figures))  # the figures docs/web.md quotes
    if not OTHER_WEB:
        assert figures["agent_requests"] == {} and figures["proposals_requests"] == {}
        assert figures["browser_requests"] == 0
