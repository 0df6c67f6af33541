import pytest
from signoff_executor.settings import RESERVED_CONNECTIONS, ExecutorSettings


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PORT", "CONCURRENCY", "PREFETCH"):
        monkeypatch.delenv(f"SIGNOFF_EXECUTOR__{name}", raising=False)
    monkeypatch.delenv("SIGNOFF_DB__POOL_SIZE", raising=False)


def test_defaults() -> None:
    settings = ExecutorSettings()
    assert settings.executor.port == 9103
    assert settings.executor.concurrency == 32
    assert settings.db.pool_size == 32 + RESERVED_CONNECTIONS


def test_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_EXECUTOR__PORT", "9200")
    monkeypatch.setenv("SIGNOFF_EXECUTOR__CONCURRENCY", "3")
    monkeypatch.setenv("SIGNOFF_EXECUTOR__GRACEFUL_TIMEOUT_S", "7.5")
    settings = ExecutorSettings()
    assert (settings.executor.port, settings.executor.concurrency) == (9200, 3)
    assert settings.executor.graceful_timeout_s == 7.5


def test_the_earlier_name_prefetch_is_the_same_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_EXECUTOR__PREFETCH", "5")
    assert ExecutorSettings().executor.concurrency == 5
    monkeypatch.setenv("SIGNOFF_EXECUTOR__CONCURRENCY", "6")  # the new name wins
    assert ExecutorSettings().executor.concurrency == 6


@pytest.mark.parametrize(("pool", "expected"), [("10", 40 + RESERVED_CONNECTIONS), ("80", 80)])
def test_the_pool_is_never_smaller_than_the_window(
    monkeypatch: pytest.MonkeyPatch, pool: str, expected: int
) -> None:
    """A pool set once for every service (the deployments' 10) is raised to what the window
    needs, not left to cap it; a larger one is kept."""
    monkeypatch.setenv("SIGNOFF_EXECUTOR__CONCURRENCY", "40")
    monkeypatch.setenv("SIGNOFF_DB__POOL_SIZE", pool)
    assert ExecutorSettings().db.pool_size == expected
