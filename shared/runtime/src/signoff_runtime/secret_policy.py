"""What production refuses as a secret: a placeholder, a value too short, a value committed here.

Every secret this repository ships — the dev-only keys, the ``CHANGE-ME`` values of the example
manifests, the compose file's dev passwords, RabbitMQ's ``guest`` — is public by being in it.
Images do not carry ``deploy/``, so the check cannot read those files at start-up: it refuses
the committed values it knows and anything shaped like a placeholder, and a test
(tests/security/test_prod_settings.py) scans the repository so that a newly committed secret
this check would let through fails the suite.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from signoff_runtime import keys

#: the shortest secret (a password in a URL, a session secret) production accepts
MIN_SECRET_CHARS = 16

_PLACEHOLDER = re.compile(
    r"change[-_ ]?me|replace[-_ ]?me|dev[-_]only|dev[-_]password|placeholder|example",
    re.I,
)
#: committed values that do not look like placeholders (compose's and RabbitMQ's defaults)
COMMITTED = frozenset({"guest", "signoff", "postgres", "password", "secret", "scripted"})


def refusal(variable: str, value: str, min_chars: int = MIN_SECRET_CHARS) -> str | None:
    """Why production refuses ``value`` for ``variable`` (never quoting it), or ``None``."""
    stripped = value.strip()
    if stripped in keys.DEV_ONLY_KEYS or stripped.lower() in COMMITTED:
        return f"{variable} is a value committed in the signoff repository"
    if _PLACEHOLDER.search(stripped):
        return f"{variable} is a placeholder"
    if len(stripped) < min_chars:
        return f"{variable} is shorter than {min_chars} characters"
    return None


def url_refusals(variable: str, url: str) -> list[str]:
    """A connection URL's password, if it has one (none: the server authenticates otherwise)."""
    password = urlsplit(url).password
    if password is None:
        return []
    found = refusal(f"the password in {variable}", unquote(password))
    return [found] if found else []
