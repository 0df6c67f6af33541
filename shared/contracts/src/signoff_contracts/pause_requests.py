"""What a pause point request may hold: one set of limits, and the one check of them.

The agent checks a model's ``wait_for_approval`` arguments with ``check`` before it asks (so the
model hears at once what to correct), and the proposals service checks every
``PausePointRequested`` with it again before it stores one (a request may come from anywhere);
``v2.PausePointRequested`` declares the same lengths. A refusal is a reason code the model can act
on: ``title_required``, ``option_too_long``, ``duplicate_options``, ``too_few_options`` (a
``choice`` needs two), ``unexpected_options`` (only a ``choice`` has options),
``form_schema_required`` / ``unexpected_form_schema`` (only ``data_entry`` has a form),
``invalid_form_schema`` (``forms``), ``payload_too_large``.

A payload is measured as the bytes of its compact UTF-8 JSON (``payload_bytes``), the same way
wherever it is checked: at the agent, at storing, and when a person's answer edits it.
"""

from __future__ import annotations

import json
from typing import Any

from signoff_contracts import forms
from signoff_contracts.reasons import Reason

MAX_TITLE = 80
MAX_DESCRIPTION = 8000
MAX_OPTIONS = 8
MAX_OPTION = 200
MIN_CHOICE_OPTIONS = 2
MAX_PAYLOAD_BYTES = 16_384


def payload_bytes(payload: Any) -> int:
    """The size of ``payload`` as compact UTF-8 JSON."""
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())


def check_payload_size(payload: Any) -> Reason | None:
    if payload is not None and payload_bytes(payload) > MAX_PAYLOAD_BYTES:
        return Reason(code="payload_too_large", params={"limit": MAX_PAYLOAD_BYTES})
    return None


def check(
    *,
    title: str,
    options: list[str],
    kind: str,
    payload: dict[str, Any] | None,
    form_schema: dict[str, Any] | None,
) -> Reason | None:
    """Why a pause point of ``kind`` with these parts cannot be asked for, or ``None``.

    Lengths a schema states (title, description, number of options) are the message's own
    (``v2.PausePointRequested``); this checks what a schema cannot say."""
    if not title.strip():
        return Reason(code="title_required")
    if (reason := _check_options(options, kind)) is not None:
        return reason
    if kind == "data_entry":
        if form_schema is None:
            return Reason(code="form_schema_required")
        if (reason := forms.check_schema(form_schema)) is not None:
            return reason
    elif form_schema is not None:
        return Reason(code="unexpected_form_schema", params={"kind": kind})
    return check_payload_size(payload)


def _check_options(options: list[str], kind: str) -> Reason | None:
    for index, option in enumerate(options):
        if not option.strip() or len(option) > MAX_OPTION:
            return Reason(code="option_too_long", params={"index": index, "limit": MAX_OPTION})
    if len(set(options)) != len(options):
        return Reason(code="duplicate_options")
    if kind == "choice" and len(options) < MIN_CHOICE_OPTIONS:
        return Reason(code="too_few_options", params={"minimum": MIN_CHOICE_OPTIONS})
    if kind != "choice" and options:
        return Reason(code="unexpected_options", params={"kind": kind})
    return None
