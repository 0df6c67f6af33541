"""What the browser tests share: Chromium's launch, a signed-in tab, the README's screenshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
from e2e_stack import Stack
from signoff_runtime.testing.processes import ServiceProcess
from signoff_runtime.testing.tools import missing, needs_module

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WAIT_MS = 20_000


def browser_api() -> Any:
    """``playwright.async_api`` driving this machine's Chromium — or the module is skipped, and
    failed in CI (``CI`` set): a browser test that never ran is not a pass."""
    if not Path(CHROMIUM).exists():
        missing("Chromium", "apt-get install chromium")
    return needs_module("playwright.async_api", "make install")


async def screenshot(page: Any, name: str) -> None:
    """The README's pictures: written only when asked (``SIGNOFF_WRITE_SCREENSHOTS=1``), so a
    test run does not rewrite tracked files."""
    if os.environ.get("SIGNOFF_WRITE_SCREENSHOTS") == "1":
        await page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


class Tab:
    """One signed-in browser page; records every dialog (an executed ``alert`` would show)."""

    def __init__(self, page: Any, base: str) -> None:
        self.page, self.base = page, base
        self.dialogs: list[str] = []

        async def dialog(shown: Any) -> None:
            self.dialogs.append(shown.message)
            await shown.dismiss()

        page.on("dialog", dialog)

    async def sign_in(self, user: dict[str, Any]) -> None:
        await self.page.goto(f"{self.base}/signin")
        await self.page.get_by_label("Email").fill(user["email"])
        await self.page.get_by_label("Password").fill(user["password"])
        await self.page.get_by_role("button", name="Sign in").click()
        await self.page.wait_for_url(f"{self.base}/")

    async def open_chat(self, section: str, say: str) -> None:
        """From the home page: the first resource of ``section``'s list, then say something."""
        listed = self.page.locator(f"section[data-section='{section}']")
        try:
            await listed.locator("button[data-action=ask]").first.click(timeout=WAIT_MS)
        except Exception as missed:  # say what the page showed instead
            shown = await self.page.locator("main").inner_text()
            said = f"no {section} to ask about at {self.page.url}: {shown}"
            raise AssertionError(said) from missed
        await self.page.wait_for_url("**/chat/**")
        await self.say(say)

    async def open_order_chat(self, say: str) -> None:
        await self.open_chat("orders", say)

    async def say(self, words: str) -> None:
        await self.page.get_by_label("Message").fill(words)
        await self.page.get_by_role("button", name="Send").click()
        await self.page.wait_for_url("**/chat/**")

    def card(self, status: str | None = None) -> Any:
        selector = "article.card" + (f"[data-status={status}]" if status else "")
        return self.page.locator(selector)


async def new_tab(browser: Any, web: ServiceProcess, width: int = 1000) -> Tab:
    context = await browser.new_context(viewport={"width": width, "height": 900})
    return Tab(await context.new_page(), web.url)


async def set_script(stack: Stack, name: str | None) -> None:
    async with httpx.AsyncClient(base_url=stack.url("model"), timeout=10) as admin:
        (await admin.post("/_admin/script", json={"script": name})).raise_for_status()
