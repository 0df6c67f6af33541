"""Repository-wide test hooks.

At the end of every session, every log file the tests' processes wrote (the services started by
end-to-end tests, ``make run`` in a clone, the benchmark) is scanned for bearer tokens, the
dev-only private keys (of tokens and contracts: what every test stack signs with) and card
numbers. One leak fails the session, whichever test caused it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from signoff_runtime.keys import DEV_ONLY_PRIVATE_KEYS

_JWT = re.compile(r"eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}")
_PAN = re.compile(r"(?<![\w.])\d{15,16}(?![\w.])")
#: trace and span ids are hex: one in about twenty thousand 16-digit span ids is all decimal
#: and passes Luhn, so their fields and ``traceparent`` values are left out of the card scan
_TRACE_IDS = re.compile(
    r'"(?:trace_id|span_id|parent_span_id)": "[0-9a-f]+"'
    r"|\b00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\b"
)


def _luhn(number: str) -> bool:
    total = 0
    for i, digit in enumerate(int(d) for d in reversed(number)):
        total += (digit * 2 - 9 if digit * 2 > 9 else digit * 2) if i % 2 else digit
    return total % 10 == 0


def leaks(text: str) -> list[str]:
    found = [f"bearer token {m.group()[:12]}…" for m in _JWT.finditer(text)]
    found += [f"private key {s[:6]}…" for s in DEV_ONLY_PRIVATE_KEYS if s in text]
    cards = _PAN.finditer(_TRACE_IDS.sub("", text))
    found += [f"card-like number {m.group()[:4]}…" for m in cards if _luhn(m.group())]
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    base = Path(factory.getbasetemp())
    problems = []
    for log in sorted(base.rglob("*.log")):
        for leak in leaks(log.read_text(errors="replace")):
            problems.append(f"{log.relative_to(base)}: {leak}")
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "secrets in the logs of this session:\n  " + "\n  ".join(problems[:50])
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
