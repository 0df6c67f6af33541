"""Faults from the environment at start, and a clear refusal to start on a bad spec.

In-process on purpose: the env → settings → app path is the same code the process runs,
and each extra simulator process costs seconds on a loaded machine.
"""

from __future__ import annotations

import httpx
import pytest
from signoff_card_provider.__main__ import main
from signoff_card_provider.app import create_app
from signoff_card_provider.client import CardProviderClient, ProviderUnavailable
from signoff_card_provider.settings import Settings


async def test_env_faults_apply_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_CARD_PROVIDER_FAULTS", "fail_before=1.0,seed=3")
    transport = httpx.ASGITransport(app=create_app(Settings()))

    async with CardProviderClient("http://provider", transport=transport) as provider:
        with pytest.raises(ProviderUnavailable) as caught:
            await provider.refund("k", "ch_1", 100, "cad")
        ledger = await provider.ledger()

    assert caught.value.definitely_not_applied is True
    assert ledger["items"] == []


def test_bad_env_faults_stop_start_up_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SIGNOFF_CARD_PROVIDER_FAULTS", "drop_response=0.2,explode=1")

    assert main() == 2

    err = capsys.readouterr().err
    assert "invalid settings: faults: " in err
    assert "unknown name 'explode'" in err
    assert "Traceback" not in err
