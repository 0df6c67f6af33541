"""The form a ``data_entry`` pause point asks a person to fill in: a FLAT subset of JSON Schema.

A card has to render the form and the proposals service has to check what comes back, both
without a general JSON Schema engine and without surprises, so only this shape is accepted (the
agent refuses any other before it asks, by the same check: ``pause_requests``)::

    {
      "type": "object",
      "properties": {                       # 1 to 20 fields
        "<name>": {                         # name: a letter or _, then letters, digits, _ (≤ 64)
          "type": "string" | "integer" | "number" | "boolean",
          "title": "<label>",               # optional, ≤ 200 characters
          "enum": [<value>, ...],           # optional, 1 to 50 distinct values of the field's type
          "maxLength": <1..8000>,           # optional, strings only (default 2000)
          "minimum": <number>,              # optional, integers and numbers only
          "maximum": <number>               # optional, integers and numbers only, ≥ minimum
        }
      },
      "required": ["<name>", ...]           # optional, distinct names of declared fields
    }

No field may ask for a secret or payment credential (a password, PIN, card number, CVV, IBAN,
social security number, token, API key…; ``format: password``; ``writeOnly``): refused with why
``secret_field`` by the rule of ``signoff_contracts.secret_fields``.

Nothing else: no nesting (``object``/``array`` fields), no ``$ref``, no other keywords, no extra
top-level keys. The submitted data must be an object holding only declared fields, every
required one present, each value of its field's exact JSON type (``true`` is not an integer, and
``1.5`` is not one either), within its ``enum``, ``maxLength`` and bounds. Refusals are reasons
(``invalid_form_schema`` / ``invalid_data``) naming the field and why, never prose.
"""

from __future__ import annotations

import math
import re
from typing import Any

from signoff_contracts.reasons import Reason
from signoff_contracts.secret_fields import secret_field

MAX_FIELDS = 20
MAX_ENUM = 50
MAX_TITLE = 200
MAX_LENGTH_CAP = 8000
DEFAULT_MAX_LENGTH = 2000

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_TOP_KEYS = frozenset({"type", "properties", "required"})
_FIELD_KEYS = frozenset({"type", "title", "enum", "maxLength", "minimum", "maximum"})
_TYPES = frozenset({"string", "integer", "number", "boolean"})


def _schema_error(why: str, field: str | None = None) -> Reason:
    params: dict[str, str | int | bool | None] = {"why": why}
    if field is not None:
        params["field"] = field[:64]
    return Reason(code="invalid_form_schema", params=params)


def _data_error(why: str, field: str | None = None) -> Reason:
    params: dict[str, str | int | bool | None] = {"why": why}
    if field is not None:
        params["field"] = field[:64]
    return Reason(code="invalid_data", params=params)


def fits_type(value: Any, json_type: str) -> bool:
    """Is ``value`` (parsed JSON) exactly of ``json_type``? bool is not a number here."""
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if json_type == "integer":
        return isinstance(value, int)
    return isinstance(value, (int, float)) and math.isfinite(value)


def check_schema(schema: Any) -> Reason | None:
    """Why ``schema`` is outside the subset, or ``None`` if it is inside."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return _schema_error("not_an_object_schema")
    if unknown := set(schema) - _TOP_KEYS:
        return _schema_error("unsupported_keyword", sorted(unknown)[0])
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return _schema_error("no_fields")
    if len(properties) > MAX_FIELDS:
        return _schema_error("too_many_fields")
    for name, spec in properties.items():
        if (reason := _check_field(name, spec)) is not None:
            return reason
    required = schema.get("required", [])
    if not isinstance(required, list) or len(set(map(str, required))) != len(required):
        return _schema_error("bad_required")
    for name in required:
        if name not in properties:
            return _schema_error("required_not_declared", str(name))
    return None


def _check_field(name: str, spec: Any) -> Reason | None:
    if not _NAME.match(name):
        return _schema_error("bad_field_name", name)
    if not isinstance(spec, dict):
        return _schema_error("not_a_field", name)
    if secret_field(name, spec):  # before the keywords: ``format``/``writeOnly`` say "secret"
        return _schema_error("secret_field", name)
    json_type = spec.get("type")
    if json_type not in _TYPES:  # nesting (object/array) is the usual way out of the subset
        return _schema_error("unsupported_type", name)
    if set(spec) - _FIELD_KEYS:
        return _schema_error("unsupported_keyword", name)
    title = spec.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE):
        return _schema_error("bad_title", name)
    if "enum" in spec and not _enum_ok(spec["enum"], json_type):
        return _schema_error("bad_enum", name)
    if "maxLength" in spec:
        limit = spec["maxLength"]
        if json_type != "string" or not fits_type(limit, "integer"):
            return _schema_error("bad_max_length", name)
        if not 1 <= limit <= MAX_LENGTH_CAP:
            return _schema_error("bad_max_length", name)
    return _check_bounds(name, spec, json_type)


def _enum_ok(values: Any, json_type: str) -> bool:
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_ENUM:
        return False
    if not all(fits_type(v, json_type) for v in values):
        return False
    return len({repr(v) for v in values}) == len(values)


def _check_bounds(name: str, spec: dict[str, Any], json_type: str) -> Reason | None:
    bounds = [spec[key] for key in ("minimum", "maximum") if key in spec]
    if not bounds:
        return None
    if json_type not in ("integer", "number") or not all(fits_type(b, "number") for b in bounds):
        return _schema_error("bad_bounds", name)
    if "minimum" in spec and "maximum" in spec and spec["minimum"] > spec["maximum"]:
        return _schema_error("bad_bounds", name)
    return None


def check_data(schema: dict[str, Any], data: Any) -> Reason | None:
    """Why ``data`` does not fill in ``schema`` (already checked), or ``None`` if it does."""
    if not isinstance(data, dict):
        return _data_error("not_an_object")
    properties: dict[str, dict[str, Any]] = schema["properties"]
    for name in data:
        if name not in properties:
            return _data_error("unknown_field", str(name))
    for name in schema.get("required", []):
        if name not in data:
            return _data_error("required", name)
    for name, value in data.items():
        if (why := _value_error(properties[name], value)) is not None:
            return _data_error(why, name)
    return None


def _value_error(spec: dict[str, Any], value: Any) -> str | None:
    json_type = spec["type"]
    if not fits_type(value, json_type):
        return "wrong_type"
    if "enum" in spec and not any(
        fits_type(option, json_type) and option == value for option in spec["enum"]
    ):
        return "not_in_enum"
    if json_type == "string" and len(value) > spec.get("maxLength", DEFAULT_MAX_LENGTH):
        return "too_long"
    if "minimum" in spec and value < spec["minimum"]:
        return "below_minimum"
    if "maximum" in spec and value > spec["maximum"]:
        return "above_maximum"
    return None
