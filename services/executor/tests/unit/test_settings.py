import pytest
from signoff_executor.settings import ExecutorSettings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIGNOFF_EXECUTOR__PORT", raising=False)
    settings = ExecutorSettings()
    assert settings.executor.port == 9103
    assert settings.executor.prefetch <= settings.db.pool_size


def test_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_EXECUTOR__PORT", "9200")
    monkeypatch.setenv("SIGNOFF_EXECUTOR__PREFETCH", "3")
    monkeypatch.setenv("SIGNOFF_EXECUTOR__GRACEFUL_TIMEOUT_S", "7.5")
    settings = ExecutorSettings()
    assert (settings.executor.port, settings.executor.prefetch) == (9200, 3)
    assert settings.executor.graceful_timeout_s == 7.5
