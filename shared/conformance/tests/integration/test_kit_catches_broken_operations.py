"""The kit can fail: run it on the toy operations and check exactly which checks fail.

The correct toy operations must pass every check; each broken variant must fail the checks of
the promise it breaks — and only those, so a failure points at the right promise. The kit runs
in a ``pytester`` subprocess (one run, one fresh database, every variant), with the same pytest
settings signoff's own suite uses.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

HERE = Path(__file__).parent
TOY_MODULES = ("toy_broken.py",)
INI = """
[tool.pytest.ini_options]
addopts = "--strict-markers -p no:cacheprovider"
asyncio_mode = "auto"
asyncio_default_fixture_loop_scope = "session"
asyncio_default_test_loop_scope = "session"
filterwarnings = ["error"]
timeout = 240
"""
RENDER = {"test_render_preview[en]", "test_render_preview[fr]"}
ATTEMPT_CHECKS = {
    "test_attempt_is_committed_before_the_provider_is_called",
    "test_lost_response_is_reconciled_to_one_effect",
    "test_reconcile_never_creates_an_effect",
}
SEARCH = "test_any_request_is_refused_or_resolves_inside_the_scope"
CODE_CHECKS = {
    "test_each_out_of_scope_request_is_rejected_for_its_own_reason",
    "test_each_stale_fact_fails_for_its_own_reason",
}
# test class → (operation, case mixin, the checks that must fail)
VARIANTS: dict[str, tuple[str, str, set[str]]] = {
    "TestGrantCredit": ("GrantCredit", "GrantCreditCase", set()),
    "TestExtraFieldsGrant": (
        "toy_broken.ExtraFieldsGrant",
        "GrantCreditCase",
        {
            "test_check_operation",
            "test_request_rejects_unknown_fields",
            "test_the_valid_request_resolves_and_smuggled_keys_never_pass",
        },
    ),
    "TestStalenessBlindGrant": (
        "toy_broken.StalenessBlindGrant",
        "GrantCreditCase",
        {"test_revalidate_fails_closed_when_stale"},
    ),
    "TestRepeatingGrant": (
        "toy_broken.RepeatingGrant",
        "GrantCreditCase",
        {"test_repeated_execution_has_one_effect"},
    ),
    "TestLeakyGrant": (
        "toy_broken.LeakyGrant",
        "GrantCreditCase",
        {
            "test_out_of_scope_requests_are_rejected",
            "test_no_field_can_name_another_organizations_record",
        },
    ),
    "TestNoteShowingGrant": ("toy_broken.NoteShowingGrant", "GrantCreditCase", RENDER),
    "TestUntranslatedResultGrant": (
        "toy_broken.UntranslatedResultGrant",
        "GrantCreditCase",
        {"test_render_result_in_every_locale"},
    ),
    "TestUntranslatedReasonGrant": (
        "toy_broken.UntranslatedReasonGrant",
        "GrantCreditCase",
        {"test_every_reason_code_has_a_text_in_every_locale"},
    ),
    "TestSendVoucher": ("SendVoucher", "VoucherCase", set()),
    "TestLateAttemptVoucher": (
        "toy_broken.LateAttemptVoucher",
        "VoucherCase",
        {
            "test_attempt_is_committed_before_the_provider_is_called",
            "test_lost_response_is_reconciled_to_one_effect",
            "test_repeated_execution_has_one_effect",
        },
    ),
    "TestBlindRetryVoucher": (
        "toy_broken.BlindRetryVoucher",
        "VoucherCase",
        {"test_reconcile_never_creates_an_effect"},
    ),
}


def _test_module() -> str:
    lines = [
        "import toy_broken",
        "from signoff_conformance import OperationConformance",
        "from signoff_conformance.toy.cases import GrantCreditCase, VoucherCase",
        "from signoff_conformance.toy.domain import GrantCredit",
        "from signoff_conformance.toy.vouchers import SendVoucher",
        "",
    ]
    for name, (operation, mixin, _) in VARIANTS.items():
        lines += [
            f"class {name}({mixin}, OperationConformance):",
            f"    operation = {operation}",
            "    check_registration = False",
            "",
        ]
    return "\n".join(lines)


def _outcomes(report: Path) -> dict[str, dict[str, str]]:
    """test class → test name → passed / failed / skipped, from a JUnit XML report."""
    found: dict[str, dict[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        tags = {child.tag for child in case}
        outcome = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        found.setdefault(cls, {})[case.get("name", "")] = outcome
    return found


def test_kit_passes_correct_operations_and_fails_each_broken_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNOFF_CONFORMANCE_EXAMPLES", "10")
    for module in TOY_MODULES:
        pytester.makepyfile(**{module.removesuffix(".py"): (HERE / module).read_text()})
    pytester.makepyprojecttoml(INI)
    pytester.makepyfile(test_toy_conformance=_test_module())
    result = pytester.runpytest_subprocess("--junitxml=report.xml", "-q", timeout=540)
    outcomes = _outcomes(pytester.path / "report.xml")
    log = result.stdout.str()[-6000:]
    assert set(outcomes) == set(VARIANTS), log

    wrong = {}
    for name, (_, _, expected) in VARIANTS.items():
        failed = {test for test, outcome in outcomes[name].items() if outcome == "failed"}
        if name == "TestLeakyGrant":  # a random search may or may not meet the leak; the
            failed.discard(SEARCH)  # deterministic sweep must

        if failed != expected:
            wrong[name] = {"failed": sorted(failed), "expected": sorted(expected)}
    assert not wrong, f"{wrong}\n{log}"
    # the toys declare no expected codes, so only those two checks may skip
    for correct in ("TestSendVoucher", "TestGrantCredit"):
        skipped = {test for test, outcome in outcomes[correct].items() if outcome == "skipped"}
        assert skipped <= CODE_CHECKS, log
        assert "failed" not in outcomes[correct].values(), log
    # the attempt protocol is checked for external operations and not even collected otherwise
    assert ATTEMPT_CHECKS <= set(outcomes["TestSendVoucher"]), log
    assert not ATTEMPT_CHECKS & set(outcomes["TestGrantCredit"]), log
