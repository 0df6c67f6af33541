"""The negative-control switches exist only under ``SIGNOFF_ENV=test``; elsewhere settings refuse
them, and ``load`` turns the refusal into one line naming the switch and exit code 2."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from signoff_runtime.settings import ServiceSettings, UnsafeSettings, load, refusals

SWITCHES = [
    "SIGNOFF_UNSAFE__NO_DEDUP",
    "SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS",
    "SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY",
    "SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX",
    "SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM",
    "SIGNOFF_UNSAFE__SKIP_EXECUTION_AUTHZ",
    "SIGNOFF_UNSAFE__ANY_SENDER",
    "SIGNOFF_UNSAFE__ACCEPT_ANY_AUDIENCE",
    "SIGNOFF_UNSAFE__NO_SESSION_REVOCATION",
    "SIGNOFF_UNSAFE__NO_SIGNIN_RATE_LIMIT",
    "SIGNOFF_UNSAFE__EVENTS_EVERY_ORGANIZATION",
    "SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT",
    "SIGNOFF_UNSAFE__WITHDRAW_ANYONES",
    "SIGNOFF_UNSAFE__ANYONE_ANSWERS_PAUSE_POINTS",
    "SIGNOFF_UNSAFE__SKIP_QUORUM",
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*SWITCHES, "SIGNOFF_ENV"]:
        monkeypatch.delenv(name, raising=False)


def test_every_switch_is_off_by_default() -> None:
    settings = ServiceSettings()
    assert settings.unsafe == UnsafeSettings()
    assert settings.unsafe.enabled() == []
    assert sorted(f"SIGNOFF_UNSAFE__{n.upper()}" for n in UnsafeSettings.model_fields) == sorted(
        SWITCHES
    )


@pytest.mark.parametrize("switch", SWITCHES)
def test_a_switch_is_honoured_under_test(monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    monkeypatch.setenv("SIGNOFF_ENV", "test")
    monkeypatch.setenv(switch, "true")
    assert ServiceSettings().unsafe.enabled() == [switch]


@pytest.mark.parametrize("env", [None, "dev", "prod", "production"])
@pytest.mark.parametrize("switch", SWITCHES)
def test_a_switch_is_refused_outside_test(
    monkeypatch: pytest.MonkeyPatch, switch: str, env: str | None
) -> None:
    if env is not None:
        monkeypatch.setenv("SIGNOFF_ENV", env)
    monkeypatch.setenv(switch, "1")
    with pytest.raises(ValidationError) as caught:
        ServiceSettings()
    [line] = [line for line in refusals(caught.value) if switch in line]
    assert "SIGNOFF_ENV=test" in line


def test_a_switch_given_in_code_is_refused_too() -> None:
    with pytest.raises(ValidationError, match="SIGNOFF_UNSAFE__NO_DEDUP"):
        ServiceSettings(env="prod", unsafe=UnsafeSettings(no_dedup=True))
    assert ServiceSettings(env="test", unsafe=UnsafeSettings(no_dedup=True)).unsafe.no_dedup


def test_load_exits_with_one_line_per_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SIGNOFF_ENV", "prod")
    monkeypatch.setenv("SIGNOFF_UNSAFE__NO_DEDUP", "true")
    monkeypatch.setenv("SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS", "true")
    with pytest.raises(SystemExit) as exited:
        load(ServiceSettings, "executor")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("signoff executor: refusing to start: SIGNOFF_UNSAFE__NO_DEDUP, ")
    assert "SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_load_names_any_other_refused_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SIGNOFF_DB__POOL_SIZE", "zero")
    with pytest.raises(SystemExit):
        load(ServiceSettings, "proposals")
    assert capsys.readouterr().err.startswith(
        "signoff proposals: refusing to start: SIGNOFF_DB__POOL_SIZE: "
    )


def test_load_returns_the_settings_when_nothing_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGNOFF_ENV", "test")
    monkeypatch.setenv("SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM", "true")
    assert load(ServiceSettings, "web").unsafe.mark_sent_before_confirm
