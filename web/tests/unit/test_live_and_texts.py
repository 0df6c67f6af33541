"""The pieces of live pages and error pages that need no server: SSE parsing, words, caching."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from signoff_web import apis, cards, live, texts
from signoff_web.live import _frame
from signoff_web.sections import Catalogue


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_server_sent_events_are_parsed_with_ids_and_multi_line_data() -> None:
    raw = _lines(": connected", "", "id: 7", "event: message", "data: a", "data: b", "", "x: y", "")
    parsed = [event async for event in apis._parse(raw)]
    assert parsed == [("7", "message", "a\nb")]


async def test_a_pushed_fragment_survives_its_own_line_breaks() -> None:
    html = '<div data-version="v1">\n<p>one</p>\n</div>'
    framed = _frame("fragment", html)
    assert framed.endswith("\n\n")
    lines = framed.split("\n")
    parsed = [event async for event in apis._parse(_lines(*lines))]
    assert parsed == [(None, "fragment", html)]


@pytest.mark.parametrize("locale", ["en", "fr"])
@pytest.mark.parametrize(
    ("code", "key"),
    [
        ("not_found", "not_found"),
        ("resource_not_found", "not_found"),
        ("not_your_conversation", "forbidden"),
        ("expired", "expired"),
        ("503", "unavailable"),
        ("unknown_section", "unknown_section"),
        ("something_new", "error"),
    ],
)
def test_every_problem_code_reads_as_what_to_do(code: str, key: str, locale: texts.Locale) -> None:
    assert texts.problem(code, locale) == texts.PROBLEMS[key][locale]


def test_roles_and_outcomes_are_words_in_the_readers_language() -> None:
    assert texts.role("viewer", "fr") == "lecteur"
    assert texts.role("unheard_of", "fr") == "unheard_of"
    shown = cards._outcome({"type": "succeeded", "result": {"amount_cents": 3500}}, "en", "X", None)
    assert shown is not None and shown["text"] == "Done: “X” was carried out as approved."
    failed = cards._outcome({"type": "failed", "correlation_id": "prp_1"}, "fr", "X", None)
    assert failed is not None and "prp_1" in failed["text"] and "succeeded" not in failed["text"]


REFUND_RESULT = {
    "refund_id": "rfd_1",
    "amount_cents": 3_500,
    "currency": "CAD",
    "destination": "card_refund",
    "resulting_order_total_cents": 40_999,
    "provider_refund_id": "re_1",
    "card_last4": "4242",
}


@pytest.mark.parametrize(
    ("locale", "said"),
    [
        ("en", "Done: Refunded 35.00 CAD to the card ending 4242 (refund re_1)"),
        ("fr", "C'est fait : 35,00 CAD remboursés sur la carte se terminant par 4242"),
    ],
)
def test_a_succeeded_card_says_what_the_operation_did(locale: texts.Locale, said: str) -> None:
    from signoff_club.operations.refund_missing_discount import RefundMissingDiscount

    op = RefundMissingDiscount()
    shown = cards._outcome({"type": "succeeded", "result": REFUND_RESULT}, locale, "X", op)
    assert shown is not None and shown["text"].startswith(said), shown
    generic = cards._outcome({"type": "succeeded", "result": {"refund": 1}}, locale, "X", op)
    assert generic is not None and generic["text"] == texts.outcome("succeeded", locale, title="X")


@pytest.mark.parametrize(
    ("locale", "waiting"),
    [("en", "waiting for confirmation"), ("fr", "en attente de confirmation")],
)
def test_an_uncertain_card_is_waiting_for_confirmation_never_failed(
    locale: texts.Locale, waiting: str
) -> None:
    """A card whose effect is unknown — however long the check takes — says it is waiting."""
    outcome = {"type": "needs_reconciliation", "status_path": "/v1/proposals/prp_1/reconciliation"}
    shown = cards._outcome(outcome, locale, "Refund", None)
    status = texts.status("needs_reconciliation", locale)
    assert shown is not None and shown["status_path"] == outcome["status_path"]
    assert status == waiting and shown["text"].lower().startswith(waiting)
    for said in (status, shown["text"].lower()):
        assert "fail" not in said and "échec" not in said and "échou" not in said


class _Agent:
    def __init__(self) -> None:
        self.calls = 0

    async def sections(self, token: str) -> list[dict[str, Any]]:
        self.calls += 1
        return [{"section": "email", "resource": "broadcast", "title": {"en": "Email"}}]


TOKENS: Any = "t"  # the fake agent takes any tokens


async def test_the_sections_are_asked_of_the_agent_and_kept_for_a_while() -> None:
    agent = _Agent()
    catalogue = Catalogue(agent, ttl_s=3600)  # type: ignore[arg-type]
    assert (await catalogue.get(TOKENS, "email")) is not None
    assert await catalogue.get(TOKENS, "broadcasts") is None
    assert agent.calls == 1
    fresh = Catalogue(agent, ttl_s=0)  # type: ignore[arg-type]
    await fresh.all(TOKENS)
    await fresh.all(TOKENS)
    assert agent.calls == 3
    section = (await fresh.all(TOKENS))[0]
    assert section.title_in("fr") == "email"  # a missing locale: the section's name


async def test_a_dropped_upstream_is_reopened_from_the_last_event_it_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live, "tokens", lambda request, who: "bearer")
    monkeypatch.setattr(asyncio, "sleep", _no_wait)  # the reconnect's back-off
    asked: list[str | None] = []

    @asynccontextmanager
    async def upstream(bearer: str, last_id: str | None) -> AsyncIterator[Any]:
        asked.append(last_id)

        async def events() -> AsyncIterator[tuple[str | None, str, str]]:
            if len(asked) == 1:
                yield "3", "message", "{}"
                yield "4", "card", "{}"
                raise httpx.ReadError("dropped")
            await asyncio.Event().wait()  # the second stream stays open
            yield None, "never", ""

        yield events()

    out: asyncio.Queue[str] = asyncio.Queue()
    reader = asyncio.create_task(live._read(None, None, upstream, lambda k, d: True, out))  # type: ignore[arg-type]
    seen = [await out.get() for _ in range(5)]
    reader.cancel()
    assert seen == [live.OPENED, "message", "card", live.LOST, live.OPENED]
    assert asked == [None, "4"]


_real_sleep = asyncio.sleep


async def _no_wait(_: float) -> None:
    await _real_sleep(0)
