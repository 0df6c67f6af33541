"""The profile splits a service's samples by what its event loop was running (py-spy's raw
format: one collapsed stack per line, root first, then its count)."""

from __future__ import annotations

from pathlib import Path

from signoff_bench import profile

_ROOT = "<module> (<string>:1);BaseEventLoop._run_once (asyncio/base_events.py:1922)"
_STEP = "Handle._run (asyncio/events.py:80)"


def _stack(*frames: str) -> str:
    return ";".join(frames)


def _raw(tmp_path: Path) -> Path:
    lines = [
        # an HTTP request's task, down into asyncpg
        (
            _stack(
                _ROOT,
                _STEP,
                "RequestResponseCycle.run_asgi (uvicorn/protocols/http/h11_impl.py:403)",
                "approve (/src/signoff_proposals/decisions/decide.py:70)",
                "Connection._do_execute (asyncpg/connection.py:2066)",
            ),
            50,
        ),
        # a consumer's task, with a step of another task nested further up: the innermost counts
        (
            _stack(
                _ROOT,
                _STEP,
                "SubscriberUsecase.consume (faststream/_internal/endpoint/usecase.py:12)",
                _STEP,
                "OutboxRelay._publish (/src/signoff_runtime/relay.py:320)",
            ),
            20,
        ),
        # the loop selecting: no step on the stack
        (_stack(_ROOT, "EpollSelector.select (selectors.py:468)"), 15),
        # py-spy stopped at asyncpg's protocol: the stack does not reach the root
        (
            _stack(
                "Connection._do_execute (asyncpg/connection.py:2066)",
                "_SelectorSocketTransport.write (asyncio/selector_events.py:1057)",
            ),
            10,
        ),
        # the span exporter's thread
        (_stack("Thread._bootstrap (threading.py:995)", "Event.wait (threading.py:629)"), 5),
    ]
    out = tmp_path / "profile.txt"
    out.write_text("".join(f"{stack} {count}\n" for stack, count in lines))
    return out


def test_samples_are_split_by_the_task_the_loop_was_running(tmp_path: Path) -> None:
    found = profile.summarize(_raw(tmp_path))
    assert found["samples"] == 100
    assert dict(found["tasks"]) == {
        "RequestResponseCycle.run_asgi (uvicorn)": 50.0,
        "OutboxRelay._publish (signoff_runtime)": 20.0,
        profile.LOOP: 15.0,
        profile.CUT: 10.0,
        profile.THREAD: 5.0,
    }


def test_the_report_names_the_split(tmp_path: Path) -> None:
    text = profile.markdown("proposals", profile.summarize(_raw(tmp_path)))
    assert (
        "Samples by what the event loop was running: RequestResponseCycle.run_asgi (uvicorn) "
        "50.0 %, OutboxRelay._publish (signoff_runtime) 20.0 %, "
    ) in text, text
