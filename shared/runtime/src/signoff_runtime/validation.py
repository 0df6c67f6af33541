"""What a validation error may say outside this process: where and how, never the value.

The input that failed may be personal or secret (a token, an e-mail address, a card number a
model pasted), so every report of a validation error — a 422 problem body, a tool error the
model reads, a dead letter's detail, a log line, a refused setting — is built here from each
error's location, type and message only (never pydantic's ``input``, ``ctx`` or ``url``), at
most ``limit`` of them. FastAPI's ``RequestValidationError`` has the same shape and is read the
same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class HasErrors(Protocol):
    def errors(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class FieldError:
    loc: tuple[str, ...]
    #: pydantic's error type (``missing``, ``string_too_long``, ``extra_forbidden`` …)
    type: str
    message: str

    @property
    def field(self) -> str:
        """The location, dotted (``options.2``); empty for the whole input."""
        return ".".join(self.loc)


def field_errors(exc: HasErrors, *, limit: int = 10) -> list[FieldError]:
    """The first ``limit`` errors of ``exc`` (a pydantic or FastAPI validation error)."""
    return [
        FieldError(
            tuple(str(part) for part in err.get("loc", ())),
            str(err.get("type", "")),
            str(err.get("msg", "")),
        )
        for err in list(exc.errors())[:limit]
    ]


def summary(exc: HasErrors, *, limit: int = 10) -> str:
    """``field: type; …`` — for a log line or a dead letter's detail."""
    return "; ".join(f"{err.field}: {err.type}" for err in field_errors(exc, limit=limit))


def problem_errors(exc: HasErrors, *, limit: int = 20) -> list[dict[str, Any]]:
    """The ``errors`` member of a ``422 invalid_request`` problem document."""
    return [
        {"loc": list(err.loc), "msg": err.message, "type": err.type}
        for err in field_errors(exc, limit=limit)
    ]
