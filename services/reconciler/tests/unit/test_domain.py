from signoff_reconciler.domain import backoff_s


def test_backoff_doubles_from_the_base_and_stops_at_the_cap() -> None:
    delays = [backoff_s(n, base_s=2.0, cap_s=30.0) for n in range(1, 7)]
    assert delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_backoff_of_a_very_old_check_is_the_cap() -> None:
    assert backoff_s(10_000, base_s=2.0, cap_s=300.0) == 300.0
    assert backoff_s(0, base_s=2.0, cap_s=300.0) == 2.0
