"""What ``logs.configure`` keeps out of the services' logs (in a fresh interpreter: it
configures logging process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys

_LIBRARIES = ["httpx", "httpcore", "aiormq", "uvicorn.access"]
_PROBE = """
import json, logging, sys
from signoff_runtime import logs
logs.configure("probe")
print(json.dumps({
    name: [logging.getLogger(name).isEnabledFor(level) for level in (logging.INFO, logging.WARNING)]
    for name in sys.argv[1:]
}))
"""


def test_per_request_library_lines_are_kept_below_info() -> None:
    """A line per provider call or delivery at INFO is noise at a refund a second (and was
    written on the event loop); the libraries' warnings still come through."""
    found = subprocess.run(
        [sys.executable, "-c", _PROBE, *_LIBRARIES], capture_output=True, text=True, check=True
    )
    assert json.loads(found.stdout) == {name: [False, True] for name in _LIBRARIES}
