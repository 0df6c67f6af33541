"""Fault decisions, the env spec and the X-Fault header, without a server."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from signoff_card_provider.faults import (
    Fault,
    FaultConfig,
    FaultMode,
    FaultPlan,
    FaultRule,
    FaultSpecError,
    parse_fault_header,
    parse_fault_spec,
)
from signoff_card_provider.settings import Settings

DICE = {FaultMode.DROP_RESPONSE: 0.3, FaultMode.FAIL_BEFORE: 0.3, FaultMode.DELAY: 0.2}


def test_spec_from_the_docs_parses() -> None:
    config = parse_fault_spec("drop_response=0.2,fail_before=0.1,delay=0.1,delay_ms=3000,seed=7")

    assert config.probabilities == {
        FaultMode.DROP_RESPONSE: 0.2,
        FaultMode.FAIL_BEFORE: 0.1,
        FaultMode.DELAY: 0.1,
    }
    assert (config.delay_ms, config.seed, config.rules) == (3000, 7, [])


def test_empty_spec_and_stray_commas_mean_no_faults() -> None:
    assert parse_fault_spec("") == FaultConfig()
    assert parse_fault_spec(" , fail_before = 1 ,") == FaultConfig(
        probabilities={FaultMode.FAIL_BEFORE: 1.0}
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("drop_response", "is not of the form name=value"),
        ("drop_response=", "is not of the form name=value"),
        ("drop=0.2", "unknown name 'drop'"),
        ("drop_response=lots", "drop_response='lots' is not a number"),
        ("delay_ms=1.5", "delay_ms='1.5' is not an integer"),
        ("seed=x", "seed='x' is not an integer"),
        ("delay=0.1,delay=0.2", "'delay' is given twice"),
        ("fail_before=1.5", "within [0, 1]"),
        ("fail_before=nan", "within [0, 1]"),
        ("drop_response=0.6,fail_before=0.6", "sum to at most 1"),
        ("delay_ms=-1", "delay_ms: Input should be greater than or equal to 0"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(FaultSpecError) as caught:
        parse_fault_spec(spec)

    assert message in str(caught.value)
    assert str(caught.value).startswith("SIGNOFF_CARD_PROVIDER_FAULTS: ")


def test_settings_refuse_a_bad_spec_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_CARD_PROVIDER_FAULTS", "drop=1")

    with pytest.raises(ValidationError, match="unknown name 'drop'"):
        Settings()


def test_settings_seed_backs_a_spec_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_CARD_PROVIDER_FAULTS", "delay=0.5")
    monkeypatch.setenv("SIGNOFF_CARD_PROVIDER_SEED", "11")

    assert Settings().fault_config().seed == 11
    assert Settings(faults="delay=0.5,seed=3").fault_config().seed == 3


def test_rules_fire_for_their_count_then_stop() -> None:
    plan = FaultPlan(FaultConfig(rules=[FaultRule(mode=FaultMode.DROP_RESPONSE, count=2)]))

    decided = [plan.decide("ch_1") for _ in range(3)]

    assert decided == [Fault(FaultMode.DROP_RESPONSE), Fault(FaultMode.DROP_RESPONSE), None]


def test_rules_filter_by_payment_and_fall_through_in_order() -> None:
    rules = [
        FaultRule(mode=FaultMode.FAIL_BEFORE, count=1, payment_ref="ch_2"),
        FaultRule(mode=FaultMode.DELAY, count=None, delay_ms=50),
    ]
    plan = FaultPlan(FaultConfig(rules=rules))

    assert plan.decide("ch_1") == Fault(FaultMode.DELAY, 50)
    assert plan.decide("ch_2") == Fault(FaultMode.FAIL_BEFORE)
    assert [plan.decide("ch_2") for _ in range(5)] == [Fault(FaultMode.DELAY, 50)] * 5


def _sequence(seed: int, draws: int = 40) -> list[FaultMode | None]:
    plan = FaultPlan(FaultConfig(probabilities=DICE, seed=seed))
    faults = [plan.decide("ch") for _ in range(draws)]
    return [fault.mode if fault else None for fault in faults]


def test_same_seed_same_faults_other_seed_other_faults() -> None:
    first, again, other = _sequence(42), _sequence(42), _sequence(43)

    assert first == again
    assert first != other
    assert set(first) == {*FaultMode, None}  # every outcome occurs: the dice are live


def test_certain_dice_always_fire() -> None:
    plan = FaultPlan(FaultConfig(probabilities={FaultMode.FAIL_BEFORE: 1.0}))

    assert all(plan.decide("ch") == Fault(FaultMode.FAIL_BEFORE) for _ in range(20))


@pytest.mark.parametrize(
    ("header", "fault"),
    [
        ("drop_response", Fault(FaultMode.DROP_RESPONSE)),
        ("fail_before", Fault(FaultMode.FAIL_BEFORE)),
        ("delay:1500", Fault(FaultMode.DELAY, 1500)),
    ],
)
def test_fault_header_parses(header: str, fault: Fault) -> None:
    assert parse_fault_header(header) == fault


@pytest.mark.parametrize("header", ["explode", "delay", "delay:soon", "fail_before:3"])
def test_bad_fault_header_is_refused(header: str) -> None:
    with pytest.raises(FaultSpecError, match="X-Fault"):
        parse_fault_header(header)
