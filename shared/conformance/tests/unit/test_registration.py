"""The registration check finds a registered operation and names the fix for one that is not."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
from signoff_conformance.registration import GROUP, RegistrationChecks
from signoff_conformance.toy.domain import GrantCredit


def test_an_operation_without_an_entry_point_fails_with_the_line_to_add_and_reinstall() -> None:
    class Check(RegistrationChecks):
        operation = GrantCredit  # the toy is never registered

    with pytest.raises(AssertionError) as failed:
        Check().test_operation_is_registered_under_its_entry_point()
    said = str(failed.value)
    assert '"account.grant_credit" = "signoff_conformance.toy.domain:GrantCredit"' in said
    assert "reinstall" in said and GROUP in said


def test_a_registered_operation_passes() -> None:
    registered = next(iter(entry_points(group=GROUP)))

    class Check(RegistrationChecks):
        operation = registered.load()

    Check().test_operation_is_registered_under_its_entry_point()
