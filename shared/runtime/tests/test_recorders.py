"""FastStream's call recorders make no mock in a service, and a test broker still gets one.

Each case runs in a fresh interpreter: the recorders of this one's brokers were built long ago.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_BROKER = """
    import asyncio, gc, sys
    from unittest.mock import MagicMock
    from faststream.rabbit import RabbitBroker, TestRabbitBroker

    def mocks():
        return sum(isinstance(o, MagicMock) for o in gc.get_objects())

    broker = RabbitBroker()
    publisher = broker.publisher("signoff.recorders.out")

    @broker.subscriber("signoff.recorders.in")
    @publisher
    async def handle(body: str) -> str:
        return body.upper()

    async def under_test():
        async with TestRabbitBroker(broker) as br:
            await br.publish("hi", "signoff.recorders.in")
            await handle.assert_called_once_with("hi")
            publisher.mock.assert_called_once_with("HI")
            return handle.mock.call_count, publisher.mock.call_count
"""


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_BROKER) + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_broker_built_after_install_holds_no_mock_and_its_test_broker_makes_them() -> None:
    # the broker above was built before install: built again, after it
    out = _run(
        """
        from signoff_runtime import recorders
        print(recorders.install(), recorders.install())
        del broker, publisher, handle
        gc.collect()
        broker = RabbitBroker()
        publisher = broker.publisher("signoff.recorders.out")

        @broker.subscriber("signoff.recorders.in")
        @publisher
        async def handle(body: str) -> str:
            return body.upper()

        print(mocks(), handle._recorder.mock.made(), publisher._recorder.mock.made())
        print(*asyncio.run(under_test()), mocks() > 0)
        """
    )
    assert out == [
        *("True", "False"),  # installed once only
        *("0", "False", "False"),  # built, and not one mock made
        *("1", "1", "True"),  # a test broker records the calls on real mocks, made then
    ], out


def test_without_it_every_recorder_makes_its_mock() -> None:
    """The control: what ``install`` saves is there to save."""
    out = _run(
        """
        print(mocks() >= 2)
        print(*asyncio.run(under_test()))
        """
    )
    assert out == ["True", *("1", "1")], out
