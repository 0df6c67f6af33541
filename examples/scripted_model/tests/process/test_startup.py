"""Settings at start: bad ones (or a default script nobody installed) stop the process
before it listens."""

from __future__ import annotations

from pathlib import Path

import pytest
from signoff_scripted_model.testing import free_port, launch

pytestmark = pytest.mark.e2e


def test_unusable_settings_exit_2_with_one_readable_line(tmp_path: Path) -> None:
    unknown = launch(tmp_path / "unknown.log", port=str(free_port()), script="no.such.script")
    bad_port = launch(tmp_path / "port.log", port="not-a-port")  # both start at once: faster

    assert (unknown.wait(timeout=20), bad_port.wait(timeout=20)) == (2, 2)
    unknown_log = (tmp_path / "unknown.log").read_text()
    assert "SIGNOFF_MODEL_SCRIPT='no.such.script' is no installed script" in unknown_log
    assert "invalid settings: port" in (tmp_path / "port.log").read_text()
    assert "Traceback" not in unknown_log
