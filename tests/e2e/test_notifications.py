"""E-mail notices through the real processes: the club's managers get one, its viewers do not,
and the link opens the card only for a signed-in member.

The proposals service sends through a local ``aiosmtpd`` server; the club directory gives the
addresses (its ``contacts``), read as the proposals service's own database role. The link's
origin is ``SIGNOFF_NOTIFY__WEB_URL`` (configuration); its path is opened on the running web.
"""

from __future__ import annotations

import email
import re
from collections.abc import Iterator
from email.message import Message
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from aiosmtpd.controller import Controller
from e2e_stack import Stack
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import ServiceProcess, free_port
from test_lifecycle import propose_refund

pytestmark = pytest.mark.e2e

MAIL_PORT = free_port()
WEB = "http://signoff-web.test"


def extra_stack_env() -> dict[str, str]:
    return {
        "SIGNOFF_NOTIFY__SMTP_PORT": str(MAIL_PORT),
        "SIGNOFF_NOTIFY__WEB_URL": WEB,
        "SIGNOFF_NOTIFY__INTERVAL_S": "0.2",
        "SIGNOFF_NOTIFY__BACKOFF_BASE_S": "0.5",
    }


class _Keep:
    def __init__(self) -> None:
        self.mails: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture(scope="module")
def mailbox() -> Iterator[_Keep]:
    keep = _Keep()
    controller = Controller(keep, hostname="127.0.0.1", port=MAIL_PORT)
    controller.start()
    try:
        yield keep
    finally:
        controller.stop()


@pytest.fixture(scope="module")
def web(stack: Stack) -> ServiceProcess:
    return stack.start_web()


def _text(message: Message) -> str:
    body = message.get_payload(decode=True)
    return body.decode() if isinstance(body, bytes) else ""


async def test_managers_get_a_notice_whose_link_needs_a_sign_in(
    stack: Stack, mailbox: _Keep, web: ServiceProcess
) -> None:
    org = (await stack.seed())["organizations"][0]
    manager, viewer = org["users"]["manager"], org["users"]["viewer"]
    pid = await propose_refund(stack, org, stack.token(manager, org))

    async def notice() -> list[tuple[list[str], Message]]:
        return [m for m in mailbox.mails if pid in _text(m[1])]

    found = await wait_until(notice, timeout=30, what="the e-mail notice")
    recipients = {r for rcpts, _ in found for r in rcpts}
    assert manager["email"] in recipients and viewer["email"] not in recipients
    link = re.search(r"https?://\S+", _text(found[0][1]))
    assert link is not None and link.group(0) == f"{WEB}/proposals/{pid}"

    path = urlparse(link.group(0)).path
    async with httpx.AsyncClient(base_url=web.url, timeout=20.0) as browser:
        anonymous = await browser.get(path)
        assert anonymous.status_code == 303 and anonymous.headers["location"] == "/signin"
        signed = await browser.post(
            "/signin", data={"email": manager["email"], "password": manager["password"]}
        )
        assert signed.status_code == 303, signed.text
        card = await browser.get(path)
    assert card.status_code == 200 and pid in card.text
