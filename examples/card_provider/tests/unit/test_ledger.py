"""The idempotency rules on their own: injected clock and ids, no server."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from signoff_card_provider.ledger import (
    InFlight,
    KeyReused,
    Ledger,
    LedgerError,
    Proceed,
    RefundParams,
    Replay,
)

RETENTION = timedelta(hours=24)
PARAMS = RefundParams(payment_ref="ch_1", amount_cents=1500, currency="cad")


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ledger(clock: FakeClock) -> Ledger:
    counter = itertools.count(1)
    return Ledger(clock, RETENTION, lambda: f"re_{next(counter)}")


def create(ledger: Ledger, key: str, params: RefundParams = PARAMS) -> str:
    assert isinstance(ledger.begin(key, params), Proceed)
    return ledger.complete(key, params).id


def test_first_create_applies_exactly_one_effect(ledger: Ledger, clock: FakeClock) -> None:
    refund_id = create(ledger, "k")

    [effect] = ledger.effects
    assert (effect.refund_id, effect.idempotency_key, effect.amount_cents) == (refund_id, "k", 1500)
    assert effect.applied_at == clock.now
    assert ledger.effects_per_key() == {"k": 1}
    assert ledger.request_counts() == {"create": 1, "lookup": 0, "replay": 0}


def test_same_key_same_params_replays_first_refund(ledger: Ledger) -> None:
    refund_id = create(ledger, "k")

    decision = ledger.begin("k", PARAMS)

    assert isinstance(decision, Replay) and decision.refund.id == refund_id
    assert ledger.effects_per_key() == {"k": 1}
    assert ledger.request_counts()["replay"] == 1


def test_same_key_other_params_is_refused(ledger: Ledger) -> None:
    create(ledger, "k")

    decision = ledger.begin("k", PARAMS.model_copy(update={"amount_cents": 1600}))

    assert isinstance(decision, KeyReused)
    assert ledger.effects_per_key() == {"k": 1}


def test_key_in_flight_refuses_any_second_request(ledger: Ledger) -> None:
    assert isinstance(ledger.begin("k", PARAMS), Proceed)

    assert isinstance(ledger.begin("k", PARAMS), InFlight)
    assert isinstance(ledger.begin("k", PARAMS.model_copy(update={"currency": "usd"})), InFlight)
    assert ledger.in_flight() == ["k"]
    assert ledger.effects == []


def test_abandon_applies_nothing_and_frees_the_key(ledger: Ledger) -> None:
    assert isinstance(ledger.begin("k", PARAMS), Proceed)
    ledger.abandon("k", PARAMS)

    assert ledger.effects == [] and ledger.in_flight() == []
    create(ledger, "k")
    assert ledger.effects_per_key() == {"k": 1}


def test_key_is_remembered_until_the_window_ends(ledger: Ledger, clock: FakeClock) -> None:
    create(ledger, "k")

    clock.now += RETENTION - timedelta(microseconds=1)
    assert isinstance(ledger.begin("k", PARAMS), Replay)


def test_after_the_window_a_reused_key_is_a_new_effect(ledger: Ledger, clock: FakeClock) -> None:
    first = create(ledger, "k")
    clock.now += RETENTION

    second = create(ledger, "k")

    assert first != second
    assert ledger.effects_per_key() == {"k": 2}
    found = ledger.find(idempotency_key="k", payment_ref=None)
    assert [refund.id for refund in found] == [first, second]


def test_lookups_count_and_never_create(ledger: Ledger) -> None:
    refund_id = create(ledger, "k")
    create(ledger, "other", PARAMS.model_copy(update={"payment_ref": "ch_2"}))

    assert ledger.get(refund_id) is not None
    assert ledger.get("re_missing") is None
    assert [r.id for r in ledger.find(idempotency_key=None, payment_ref="ch_1")] == [refund_id]
    assert ledger.find(idempotency_key="k", payment_ref="ch_2") == []

    assert ledger.request_counts() == {"create": 2, "lookup": 4, "replay": 0}
    assert len(ledger.effects) == 2


def test_complete_without_begin_is_a_bug(ledger: Ledger) -> None:
    with pytest.raises(LedgerError):
        ledger.complete("k", PARAMS)
