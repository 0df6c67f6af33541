import pytest
from signoff_reconciler.settings import ReconcilerSettings


def test_port_and_backoff_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ReconcilerSettings().reconciler.port == 9104
    monkeypatch.setenv("SIGNOFF_RECONCILER__PORT", "9300")
    monkeypatch.setenv("SIGNOFF_RECONCILER__MAX_BACKOFF_S", "60")
    settings = ReconcilerSettings()
    assert (settings.reconciler.port, settings.reconciler.max_backoff_s) == (9300, 60.0)
