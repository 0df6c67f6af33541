"""App-authored messages: every code in both locales, reasons from the operation's own words."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict
from signoff_agent import prompts, texts
from signoff_contracts.assistants import Assistant
from signoff_contracts.operations import LOCALES, Scope
from signoff_runtime.registry import Operations


class Op:
    kind = "order.refund_missing_discount"
    version = 1
    reasons = {
        "amount_changed": {
            "en": "Now {current_cents} cents.",
            "fr": "Maintenant {current_cents} cents.",
        }
    }


class Paid(BaseModel):
    model_config = ConfigDict(frozen=True)
    amount: int
    card: str | None = None


class PayOp:
    """An operation's outcome parts only: ``Result`` and its own sentence per locale."""

    kind = "order.pay_back"
    version = 2
    reasons: dict[str, Any] = {}
    Result = Paid

    def parse_result(self, data: Any) -> Paid:
        return Paid.model_validate(data)

    def render_result(self, result: Paid, locale: str) -> str:
        said = {"en": "Paid {amount} back to {card}.", "fr": "{amount} rendus sur {card}."}
        return said[locale].format(amount=result.amount, card=result.card or "?")


OPS = Operations([Op(), PayOp()])  # type: ignore[list-item]
DONE = {"kind": PayOp.kind, "version": 2, "result": {"amount": 35, "card": "4242"}}


def test_a_success_says_what_the_operation_did_in_the_readers_locale() -> None:
    assert texts.render("proposal_succeeded", DONE, "en", OPS) == "Done: Paid 35 back to 4242."
    assert texts.render("proposal_succeeded", DONE, "fr", OPS) == "C'est fait : 35 rendus sur 4242."


def test_a_result_that_cannot_be_parsed_falls_back_to_the_generic_sentence() -> None:
    generic = texts.MESSAGES["proposal_succeeded"]
    for params in (
        {**DONE, "result": {"amount": "lots"}},  # does not parse
        {**DONE, "result": {}},  # an operator's generic Succeeded({})
        {**DONE, "version": 9},  # a version this agent does not know
        {"kind": "no.such_operation", "result": {"amount": 1}},
        {"kind": PayOp.kind},  # written before results were carried
    ):
        for locale in LOCALES:
            assert texts.render("proposal_succeeded", params, locale, OPS) == generic[locale]


def test_every_message_exists_in_every_locale() -> None:
    for code, by_locale in texts.MESSAGES.items():
        assert set(by_locale) == set(LOCALES), code
    for table in (texts.CAUSES, texts.REASONS):
        for code, by_locale in table.items():
            assert set(by_locale) == set(LOCALES), code


def test_a_viewer_reads_in_their_locale() -> None:
    params = {"kind": Op.kind, "reason": {"code": "amount_changed", "params": {"current_cents": 7}}}
    en = texts.render("proposal_revision_required", params, "en", OPS)
    fr = texts.render("proposal_revision_required", params, "fr", OPS)
    assert "Now 7 cents." in en and "Maintenant 7 cents." in fr


def test_unknown_reasons_and_codes_still_say_something_safe() -> None:
    params = {"reason": {"code": "mystery", "params": {}}}
    assert "mystery" in texts.render("proposal_refused", params, "en", OPS)
    assert texts.render("no_such_code", {}, "en", OPS) == "no_such_code"
    assert "…" in texts.render("proposal_failed", {}, "en", OPS)


def test_a_decline_with_a_reason_quotes_it() -> None:
    said = texts.render("proposal_declined", {"decline_reason": "Use credit"}, "fr", OPS)
    assert "« Use credit »" in said
    assert texts.render("proposal_declined", {"decline_reason": None}, "en", OPS).endswith(
        "declined."
    )


class Helper(Assistant):
    section = "orders"
    resource = "order"
    instructions = {"en": "Be brief.", "fr": "Soyez bref."}
    max_context_chars = 50

    async def exists(self, conn: Any, scope: Scope) -> bool:
        return True

    async def context(self, conn: Any, scope: Scope) -> str:
        return ""


def _row(**fields: Any) -> Any:
    base: dict[str, Any] = {
        "role": "user",
        "content": "",
        "code": None,
        "params": {},
        "proposal_id": None,
    }
    return SimpleNamespace(**{**base, "pause_point_id": None, **fields})


def test_the_model_gets_bounded_app_written_context() -> None:
    notes = [
        SimpleNamespace(
            code="declined",
            proposal_id="prp_1",
            params={"kind": Op.kind, "decline_reason": "Refund to credit instead " + "z" * 900},
        )
    ]
    history = [_row(content=f"message {i} " + "y" * 300) for i in range(30)]
    history.append(_row(role="app", code="proposal_ready", proposal_id="prp_1"))
    history.append(_row(content="latest"))
    budget = prompts.Budget(history_messages=10, history_chars=1000, note_chars=100)
    messages = prompts.build(Helper(), "fr", "C" * 500, notes, history, OPS, budget)  # type: ignore[arg-type]
    system, context, *rest = messages
    assert "Soyez bref." in system["content"] and "French" in system["content"]
    assert "C" * 50 in context["content"] and "C" * 51 not in context["content"]
    assert "Refund to credit instead" in context["content"] and "z" * 100 not in context["content"]
    assert rest[-1] == {"role": "user", "content": "latest"}
    assert rest[-2]["role"] == "system" and "(prp_1)" in rest[-2]["content"]
    assert sum(len(m["content"]) for m in rest) <= 1000 and len(rest) < 10


def test_the_next_turn_is_told_what_a_success_did() -> None:
    notes = [SimpleNamespace(code="succeeded", proposal_id="prp_2", params=DONE)]
    history = [
        _row(role="app", code="proposal_succeeded", proposal_id="prp_2", params=DONE),
        _row(content="thanks"),
    ]
    budget = prompts.Budget(note_chars=100)
    _, context, *rest = prompts.build(Helper(), "fr", "", notes, history, OPS, budget)  # type: ignore[arg-type]
    assert (
        "prp_2 (order.pay_back) was approved and carried out: Paid 35 back to 4242."
        in (context["content"])
    )
    assert rest[0]["content"] == "Application notice (prp_2): Done: Paid 35 back to 4242."
    unparsable = SimpleNamespace(code="succeeded", proposal_id="prp_3", params={"kind": "x.y"})
    assert prompts.note_line(unparsable, OPS, 100).startswith(  # type: ignore[arg-type]
        "Proposal prp_3 (x.y) was approved and carried out. "
    )


def test_a_withdrawal_renders_with_and_without_its_reason() -> None:
    said = texts.render("proposal_withdrawn", {"decline_reason": "Wrong order"}, "fr", OPS)
    assert said == "La proposition a été retirée : « Wrong order »"
    assert texts.render("proposal_withdrawn", {"decline_reason": None}, "en", OPS) == (
        "The proposal was withdrawn."
    )


def test_an_outcome_approved_by_several_people_names_them() -> None:
    params = {"kind": "x.y", "approved_by": ["Morgan Lee", "Sam Roy"]}
    assert texts.render("proposal_succeeded", params, "en").endswith(
        "(Approved by Morgan Lee and Sam Roy.)"
    )
    three = {**params, "approved_by": ["A", "B", "C"]}
    assert texts.render("proposal_failed", three, "fr").endswith("(Approuvée par A, B et C.)")
    assert "Approved" not in texts.render("proposal_succeeded", {"kind": "x.y"}, "en")
