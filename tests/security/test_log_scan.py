"""The session-wide log scan (root ``conftest.py``) finds what it must and nothing else."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from signoff_runtime import keys
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import issue_token

_spec = importlib.util.spec_from_file_location(
    "repo_conftest", Path(__file__).resolve().parents[2] / "conftest.py"
)
assert _spec and _spec.loader
repo_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(repo_conftest)


def test_a_token_a_secret_and_a_card_number_are_found() -> None:
    token = issue_token(AuthSettings(), "usr_1", "org_1")
    text = (
        f"a {token} b\nkey={keys.DEV_ONLY_TOKEN_PRIVATE_KEY}\n"
        f"contract={keys.DEV_ONLY_CONTRACT_PRIVATE_KEY}\npan 4242424242424242 end"
    )
    found = repo_conftest.leaks(text)
    assert len(found) == 4, found


def test_ids_timestamps_and_amounts_are_not_leaks() -> None:
    text = (
        '{"proposal_id": "prp_01m8n7cetbs4d3shzzmtdt8hdx", "at": 1732950000000, '
        '"amount_cents": 3500, "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", '
        '"ref": "ch_1234567890123456x"}'
    )
    assert repo_conftest.leaks(text) == []


def test_an_all_decimal_span_id_that_passes_luhn_is_not_a_card() -> None:
    """Seen in a fault run's log: span id 0636548013099288 is all digits and Luhn-valid."""
    assert repo_conftest._luhn("0636548013099288")
    text = (
        '{"event": "proposal.outcome", "trace_id": "30570e3702af817e04b4d457e4529408", '
        '"span_id": "0636548013099288"} traceparent '
        "00-30570e3702af817e04b4d457e4529408-0636548013099288-01"
    )
    assert repo_conftest.leaks(text) == []
    assert repo_conftest.leaks('{"note": "card 0636548013099288"}') != []
