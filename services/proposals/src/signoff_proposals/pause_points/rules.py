"""The rules of pause points, pure and synchronous: what may be stored, and what resolves one.

A request that breaks a rule is refused with a reason code the model can act on (it wrote the
request): what does not parse is ``title_too_long``, ``description_too_long``,
``too_many_options``, ``unknown_kind`` or ``invalid_message``; what parses is checked by
``signoff_contracts.pause_requests`` — the agent's check too — whose limits and codes are the
ones stated there.

A resolution must fit the kind: ``approval`` takes ``approve`` or ``decline``; ``choice`` takes
``option`` naming one of its options, or ``decline``; ``data_entry`` takes ``data`` that fills
in its form, or ``decline``. Anything else is refused (``action_not_allowed``,
``option_required``, ``option_not_offered``, ``data_required``, ``unexpected_option``,
``unexpected_data``, ``invalid_data``).

Any answer but ``decline`` may carry an edited ``payload`` (the seed's payload override) when the
pause point has a payload: a JSON object within ``pause_requests.MAX_PAYLOAD_BYTES``, and, when
the pause point has a schema (a ``data_entry`` form), one that fills it in (``invalid_data``
otherwise). Else it is refused: ``unexpected_payload``, ``payload_too_large``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from signoff_contracts import forms, pause_requests
from signoff_contracts.reasons import Reason
from signoff_contracts.v2 import PausePointRequested
from signoff_runtime.validation import field_errors

ALLOWED_ACTIONS: dict[str, frozenset[str]] = {
    "approval": frozenset({"approve", "decline"}),
    "choice": frozenset({"option", "decline"}),
    "data_entry": frozenset({"data", "decline"}),
}

# the first validation error of a field the model wrote → the reason code it gets back
_FIELD_CODES = {
    "title": "title_too_long",
    "description": "description_too_long",
    "options": "too_many_options",
    "kind": "unknown_kind",
}


def reason_for_invalid(exc: ValidationError) -> Reason:
    """The reason a ``PausePointRequested`` that failed to parse is refused with."""
    for err in field_errors(exc, limit=50):
        field = err.loc[0] if err.loc else ""
        if field == "options" and len(err.loc) > 1:
            return Reason(code="invalid_message", params={"field": "options"})
        if field in _FIELD_CODES and err.type != "missing":
            code = _FIELD_CODES[field]
            if field == "kind" or err.type in ("string_too_long", "too_long"):
                return Reason(code=code)
    return Reason(code="invalid_message")


def check_request(msg: PausePointRequested) -> Reason | None:
    """Why ``msg`` (which parsed) cannot be stored, or ``None``."""
    return pause_requests.check(
        title=msg.title,
        options=msg.options,
        kind=msg.kind,
        payload=msg.payload,
        form_schema=msg.form_schema,
    )


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a person answered: the action and, by kind, the option or the form's data."""

    action: str
    option: str | None = None
    data: dict[str, Any] | None = None
    reply: str | None = None
    #: the person's edit of the pause point's payload, sent on with the answer
    payload: dict[str, Any] | None = None

    def stored(self) -> dict[str, Any]:
        """The JSON kept in ``pause_points.resolution`` and sent in ``PausePointResolved``."""
        shown: dict[str, Any] = {"action": self.action}
        for key in ("option", "data", "reply", "payload"):
            if (value := getattr(self, key)) is not None:
                shown[key] = value
        return shown


def check_resolution(
    kind: str,
    options: list[str],
    form_schema: dict[str, Any] | None,
    answer: Resolution,
    *,
    payload: dict[str, Any] | None = None,
) -> Reason | None:
    """Why ``answer`` does not resolve a pause point of ``kind`` (whose stored payload is
    ``payload``), or ``None`` if it does."""
    if answer.action not in ALLOWED_ACTIONS[kind]:
        return Reason(code="action_not_allowed", params={"kind": kind, "action": answer.action})
    if answer.option is not None and answer.action != "option":
        return Reason(code="unexpected_option")
    if answer.data is not None and answer.action != "data":
        return Reason(code="unexpected_data")
    if answer.action == "option":
        if answer.option is None:
            return Reason(code="option_required")
        if answer.option not in options:
            return Reason(code="option_not_offered")
    if answer.action == "data":
        if answer.data is None:
            return Reason(code="data_required")
        assert form_schema is not None, "data_entry pause points are stored with a form"
        if (reason := forms.check_data(form_schema, answer.data)) is not None:
            return reason
    if answer.payload is not None:
        return check_payload(form_schema, payload, answer)
    return None


def check_payload(
    form_schema: dict[str, Any] | None, payload: dict[str, Any] | None, answer: Resolution
) -> Reason | None:
    """Why the edited payload of ``answer`` cannot go with it, or ``None``."""
    if payload is None or answer.action == "decline":
        return Reason(code="unexpected_payload")
    if (reason := pause_requests.check_payload_size(answer.payload)) is not None:
        return reason
    if form_schema is not None:
        return forms.check_data(form_schema, answer.payload)
    return None
