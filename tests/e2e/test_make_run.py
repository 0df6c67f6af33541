"""`make run` from a clean clone reaches healthy services, and the README's walkthrough works
as written against it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from signoff_runtime.testing.processes import free_port
from sqlalchemy.engine import make_url

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def walkthrough() -> str:
    readme = (ROOT / "README.md").read_text()
    block = re.search(
        r"<!-- walkthrough:start -->\s*```sh\n(.*?)```\s*<!-- walkthrough:end -->", readme, re.S
    )
    assert block, "README.md lost its walkthrough markers"
    return block.group(1)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    target = tmp_path / "signoff"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(target)], check=True)
    return target


def test_make_run_from_a_clean_clone_serves_the_readme_walkthrough(
    clone: Path, database_url: str, amqp_url: str
) -> None:
    db = make_url(database_url)
    ports = {
        name: free_port()
        for name in ("agent", "proposals", "executor", "reconciler", "provider", "model")
    }
    env = {
        **os.environ,
        "SIGNOFF_DB__URL": db.set(database=f"{db.database}_run").render_as_string(False),
        "SIGNOFF_AMQP__URL": amqp_url,
        "SIGNOFF_AMQP__PREFIX": f"run{ports['agent']}",
        "SIGNOFF_AGENT__PORT": str(ports["agent"]),
        "SIGNOFF_PROPOSALS__PORT": str(ports["proposals"]),
        "SIGNOFF_EXECUTOR__PORT": str(ports["executor"]),
        "SIGNOFF_RECONCILER__PORT": str(ports["reconciler"]),
        "SIGNOFF_CARD_PROVIDER_PORT": str(ports["provider"]),
        "SIGNOFF_MODEL_PORT": str(ports["model"]),
    }
    env.pop("OPENAI_BASE_URL", None)  # the scripted model answers under make run
    env.pop("VIRTUAL_ENV", None)
    log = (clone / "make-run.log").open("wb")
    run = subprocess.Popen(
        ["make", "run"],
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_for_banner(clone / "make-run.log", run, deadline_s=420)
        for name, port in ports.items():
            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200, name
        script = walkthrough()
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=clone,
            capture_output=True,
            text=True,
            timeout=180,
            env={
                **env,
                "AGENT": f"http://127.0.0.1:{ports['agent']}",
                "PROPOSALS": f"http://127.0.0.1:{ports['proposals']}",
                "PROVIDER": f"http://127.0.0.1:{ports['provider']}",
            },
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert "status: succeeded" in result.stdout, result.stdout[-3000:]
    finally:
        _stop(run)
        log.close()
        shutil.rmtree(clone / ".venv", ignore_errors=True)


def _stop(run: subprocess.Popen[bytes]) -> None:
    if run.poll() is not None:
        return
    os.killpg(run.pid, signal.SIGINT)
    try:
        run.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(10)


def _wait_for_banner(log: Path, run: subprocess.Popen[bytes], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "signoff is running" in text:
            return
        if run.poll() is not None or "not healthy after" in text:
            raise AssertionError(f"make run failed:\n{text[-4000:]}")
        time.sleep(0.5)
    raise AssertionError(
        f"make run not ready after {deadline_s}s:\n" + log.read_text(errors="replace")[-4000:]
    )
