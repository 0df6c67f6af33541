"""Which fault, if any, the simulator injects into the next refund it is about to create.

Faults exist so the executor and the reconciler can be tested against the three ways a
real provider hurts: it applies a refund and the answer never arrives (``drop_response``),
it refuses before doing anything (``fail_before``, a 503), or it is slow enough that the
caller gives up while the refund still lands (``delay``).

Faults apply only to create requests that will make a new refund — never to replays,
refusals (409/422) or lookups. Three sources, first match wins:

1. the ``X-Fault`` request header (``drop_response``, ``fail_before`` or ``delay:<ms>``),
   honoured only when admin routes are allowed;
2. scripted rules (``POST /_admin/faults {"rules": [...]}``), each firing for the next
   ``count`` matching creates (``count: null`` = all), optionally only for one
   ``payment_ref``;
3. seeded dice (``{"probabilities": {...}, "delay_ms": n, "seed": s}``): one draw per create
   that no rule took, so the same seed gives the same sequence of faults.

At start the dice can come from ``SIGNOFF_CARD_PROVIDER_FAULTS``, a comma-separated list of
``name=value`` items::

    drop_response=0.2,fail_before=0.1,delay=0.1,delay_ms=3000,seed=7

``drop_response``, ``fail_before`` and ``delay`` are probabilities in [0, 1] whose sum is at
most 1; ``delay_ms`` (integer >= 0) is how long a ``delay`` fault waits; ``seed`` (integer)
fixes the dice. Each name at most once; an empty string means no faults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_SPEC_NAME = "SIGNOFF_CARD_PROVIDER_FAULTS"
_Number = TypeVar("_Number", int, float)


class FaultMode(StrEnum):
    """The three ways the simulator misbehaves; the order is the order of the dice."""

    DROP_RESPONSE = "drop_response"
    FAIL_BEFORE = "fail_before"
    DELAY = "delay"


@dataclass(frozen=True, slots=True)
class Fault:
    """One decided fault for one request."""

    mode: FaultMode
    delay_ms: int = 0


class FaultSpecError(ValueError):
    """A fault spec string (env) or ``X-Fault`` header that cannot be understood."""


class FaultRule(BaseModel):
    """Inject ``mode`` into the next ``count`` creates (``None`` = every one) that match."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: FaultMode
    count: int | None = Field(default=1, ge=1, description="How many creates; null = all.")
    payment_ref: str | None = Field(default=None, description="Only creates for this payment.")
    delay_ms: int = Field(default=0, ge=0, le=600_000, description="Wait of a delay fault.")


class FaultConfig(BaseModel):
    """The body of ``POST /_admin/faults``; also what the env spec parses into."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: list[FaultRule] = Field(default_factory=list)
    probabilities: dict[FaultMode, float] = Field(default_factory=dict)
    delay_ms: int = Field(default=0, ge=0, le=600_000, description="Wait of a dice delay.")
    seed: int | None = None

    @model_validator(mode="after")
    def _probabilities_valid(self) -> FaultConfig:
        """Each a probability, together at most certainty, so one draw picks at most one."""
        if any(not 0.0 <= p <= 1.0 for p in self.probabilities.values()):
            raise ValueError("each fault probability must be within [0, 1]")
        if sum(self.probabilities.values()) > 1.0 + 1e-9:
            raise ValueError("fault probabilities must sum to at most 1")
        return self


class FaultPlan:
    """The live fault state: rules with their remaining counts, and the seeded dice."""

    def __init__(self, config: FaultConfig | None = None) -> None:
        self.config = config or FaultConfig()
        self._remaining = [rule.count for rule in self.config.rules]
        self._dice = random.Random(self.config.seed)  # noqa: S311 - test dice, not crypto

    def decide(self, payment_ref: str) -> Fault | None:
        """The fault for the next create of ``payment_ref``; consumes a rule or one draw."""
        for index, rule in enumerate(self.config.rules):
            remaining = self._remaining[index]
            if rule.payment_ref not in (None, payment_ref) or remaining == 0:
                continue
            if remaining is not None:
                self._remaining[index] = remaining - 1
            return Fault(rule.mode, rule.delay_ms)
        return self._roll()

    def _roll(self) -> Fault | None:
        if not self.config.probabilities:
            return None
        draw = self._dice.random()
        threshold = 0.0
        for mode in FaultMode:
            threshold += self.config.probabilities.get(mode, 0.0)
            if draw < threshold:
                return Fault(mode, self.config.delay_ms)
        return None


def parse_fault_spec(spec: str) -> FaultConfig:
    """Parse the env spec (format in the module docstring); raise ``FaultSpecError``."""
    values: dict[str, str] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, sep, value = (piece.strip() for piece in item.partition("="))
        if not sep or not value:
            raise FaultSpecError(f"{_SPEC_NAME}: {item!r} is not of the form name=value")
        if name in values:
            raise FaultSpecError(f"{_SPEC_NAME}: {name!r} is given twice")
        values[name] = value
    return _config_from_items(values)


def _config_from_items(values: dict[str, str]) -> FaultConfig:
    known = {mode.value for mode in FaultMode} | {"delay_ms", "seed"}
    unknown = sorted(set(values) - known)
    if unknown:
        expected = ", ".join(sorted(known))
        raise FaultSpecError(f"{_SPEC_NAME}: unknown name {unknown[0]!r} (expected: {expected})")
    probabilities = {
        mode: _number(values[mode.value], mode.value, float)
        for mode in FaultMode
        if mode.value in values
    }
    delay_ms = _number(values.get("delay_ms", "0"), "delay_ms", int)
    seed = _number(values["seed"], "seed", int) if "seed" in values else None
    try:
        return FaultConfig(probabilities=probabilities, delay_ms=delay_ms, seed=seed)
    except ValidationError as exc:
        reasons = "; ".join(_reason(error["loc"], error["msg"]) for error in exc.errors())
        raise FaultSpecError(f"{_SPEC_NAME}: {reasons}") from None


def _reason(loc: tuple[int | str, ...], message: str) -> str:
    message = message.removeprefix("Value error, ")
    return f"{'.'.join(map(str, loc))}: {message}" if loc else message


def _number(text: str, name: str, kind: type[_Number]) -> _Number:
    try:
        return kind(text)
    except ValueError:
        raise FaultSpecError(
            f"{_SPEC_NAME}: {name}={text!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None


def parse_fault_header(value: str) -> Fault:
    """Parse ``X-Fault``: ``drop_response``, ``fail_before`` or ``delay:<ms>``."""
    mode_text, _, argument = value.strip().partition(":")
    try:
        mode = FaultMode(mode_text)
    except ValueError:
        raise FaultSpecError(
            f"X-Fault: {value!r} is not drop_response, fail_before or delay:<ms>"
        ) from None
    if mode is not FaultMode.DELAY:
        if argument:
            raise FaultSpecError(f"X-Fault: {mode.value} takes no argument")
        return Fault(mode)
    if not argument.isdigit():
        raise FaultSpecError("X-Fault: delay needs milliseconds, e.g. delay:1500")
    return Fault(mode, int(argument))
