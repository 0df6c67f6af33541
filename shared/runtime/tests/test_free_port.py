"""``free_port`` never hands out one port twice in a process (two services of one stack were
given the same port: the second failed to bind)."""

from __future__ import annotations

from signoff_runtime.testing.processes import free_port


def test_no_port_is_handed_out_twice() -> None:
    # the kernel picks bind(0) ports at random from ~28,000: 300 draws repeat one more often than
    # not (the birthday bound), so this fails without the memory of what was handed out
    ports = [free_port() for _ in range(300)]

    assert len(set(ports)) == len(ports)
