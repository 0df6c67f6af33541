"""What a service's start made is frozen out of the cyclic collector once it is up, and only in a
``signoff serve`` process. Each case runs in a fresh interpreter (freezing this one would keep
the test session's cycles until it ends)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_serve_process_freezes_what_its_start_made_and_still_collects_what_comes_later() -> None:
    settled, frozen, kept, collected = _run(
        """
        import gc, sys, weakref
        sys.argv = ["signoff", "serve", "proposals"]
        import signoff_cli
        import signoff_proposals.app
        from signoff_runtime import collector

        class Node:
            pass

        started = Node(); started.me = started  # a cycle the start made, still referenced
        print(collector.settle(), gc.get_freeze_count() > 50_000)
        # frozen: in none of the generations a collection walks
        print(not any(o is started for g in range(3) for o in gc.get_objects(generation=g)))
        later = Node(); later.me = later; gone = weakref.ref(later); del later
        gc.collect()
        print(gone() is None)
        """
    )
    assert (settled, frozen, collected) == ("True", "True", "True")
    assert kept == "True"


def test_elsewhere_settle_does_nothing() -> None:
    assert _run(
        """
        import gc
        from signoff_runtime import collector
        print(collector.settle(), gc.get_freeze_count())
        """
    ) == ["False", "0"]
