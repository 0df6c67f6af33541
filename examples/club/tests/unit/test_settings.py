from __future__ import annotations

import pytest
from signoff_club.operations.refund_missing_discount import RefundMissingDiscount
from signoff_club.settings import ClubSettings


def test_the_provider_comes_from_the_domains_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_CLUB_PROVIDER_URL", "http://provider.test:9999")
    monkeypatch.setenv("SIGNOFF_CLUB_PROVIDER_TIMEOUT_S", "1.5")
    monkeypatch.setenv("SIGNOFF_CLUB_ATTEMPT_LEASE_S", "45")
    settings = ClubSettings()
    assert (settings.provider_url, settings.provider_timeout_s, settings.attempt_lease_s) == (
        "http://provider.test:9999",
        1.5,
        45,
    )
    client = RefundMissingDiscount().open_provider()
    assert str(client._http.base_url).startswith("http://provider.test:9999")  # type: ignore[attr-defined]
    assert client._http.timeout.read == 1.5  # type: ignore[attr-defined]


def test_defaults() -> None:
    settings = ClubSettings()
    assert settings.provider_url == "http://127.0.0.1:8010"
    assert (settings.provider_timeout_s, settings.attempt_lease_s) == (5.0, 30)
