"""The kit's pure parts: probes, the case's own validation and the provider spy (no I/O)."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError
from signoff_conformance import CaseError, ConformanceCase, ProviderSpy, is_unique_violation, probes
from signoff_contracts.operations import Actor, AttemptRef, PreviewLine, RenderedPreview, Scope


class Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    account_id: str
    amount_cents: int
    kind: Literal["a", "b"] = "a"
    tags: list[str] = []
    extra: Any = None


VALID = {"account_id": "acc_1", "amount_cents": 500, "kind": "b", "tags": ["x"], "extra": 1}


def test_wrongly_typed_covers_every_checkable_field_and_each_variant_fails() -> None:
    variants = probes.wrongly_typed(Args, VALID)
    assert set(variants) == {"account_id", "amount_cents", "kind", "tags"}  # not `extra: Any`
    for data in variants.values():
        with pytest.raises(ValidationError):
            Args.model_validate(data)


@pytest.mark.parametrize("kind", probes.CORRUPTIONS)
def test_every_corruption_of_valid_arguments_fails_to_parse(kind: str) -> None:
    Args.model_validate(VALID)
    variants = probes.corrupted(Args, VALID, kind)
    assert variants
    for data in variants.values():
        with pytest.raises(ValidationError):
            Args.model_validate(data)


def test_missing_required_field_names_only_required_fields() -> None:
    assert set(probes.corrupted(Args, VALID, "missing_required_field")) == {
        "without account_id",
        "without amount_cents",
    }


def test_unknown_corruption_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown corruption"):
        probes.corrupted(Args, VALID, "typo")


class Preview(BaseModel):
    name: str


def _rendered(title: str, value: str = "") -> RenderedPreview:
    return RenderedPreview(title=title, lines=[PreviewLine(label="Name", value=value)])


def test_leak_is_request_text_rendered_but_not_in_the_preview() -> None:
    request = {"account_id": "acc_1", "note": "give them double"}
    preview = Preview(name="Ada")
    assert probes.leaked_request_text(request, preview, _rendered("Credit Ada")) == []
    leaked = _rendered("Credit Ada", "give them double")
    assert probes.leaked_request_text(request, preview, leaked) == ["give them double"]


def test_request_text_the_preview_holds_may_be_rendered() -> None:
    request = {"note": "give them double"}
    preview = Preview(name="note: give them double")
    assert probes.leaked_request_text(request, preview, _rendered("give them double")) == []


def _case(**overrides: Any) -> ConformanceCase:
    async def count() -> int:
        return 0

    values: dict[str, Any] = {
        "scope": Scope(organization_id="org_a", section="s", resource_id="r"),
        "manager": Actor(user_id="usr_m", organization_id="org_a", role="manager"),
        "viewer": Actor(user_id="usr_v", organization_id="org_a", role="viewer"),
        "valid_request": {},
        "out_of_scope_requests": {"other": {}},
        "stale_facts": {"gone": None},
        "engine": None,
        "count_effects": count,
    }
    return ConformanceCase(**(values | overrides))


def test_case_refuses_members_of_another_organization() -> None:
    _case()
    with pytest.raises(CaseError, match="manager"):
        _case(manager=Actor(user_id="usr_m", organization_id="org_b", role="manager"))


@pytest.mark.parametrize("empty", ["out_of_scope_requests", "stale_facts"])
def test_case_refuses_to_check_nothing(empty: str) -> None:
    with pytest.raises(CaseError):
        _case(**{empty: {}})


class Client:
    def __init__(self) -> None:
        self.region = "eu"

    async def refund(self, key: str) -> str:
        return f"refunded {key}"

    def url(self) -> str:
        return "http://provider"


async def test_spy_runs_the_hook_before_each_coroutine_call_and_stays_transparent() -> None:
    attempt = AttemptRef(attempt_id="att_1", idempotency_key="k")
    order: list[str] = []

    async def hook(seen: AttemptRef) -> None:
        order.append(f"hook {seen.attempt_id}")

    spy = ProviderSpy(attempt, hook)
    client = spy.wrap(Client())
    assert client.region == "eu" and client.url() == "http://provider"
    assert await client.refund("k") == "refunded k"
    assert order == ["hook att_1"] and spy.calls == 1
    assert ProviderSpy(attempt, None).wrap(client) is client


def test_only_integrity_errors_are_unique_violations() -> None:
    assert not is_unique_violation(ValueError("23505"))
