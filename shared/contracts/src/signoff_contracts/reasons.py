"""Reasons are codes with parameters, never prose.

Each viewer renders a reason in their own locale from its code; the model sees the code and its
safe parameters. Codes are stable strings (``snake_case``), parameters are flat scalars so no
internal object or provider payload can ride along.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

ReasonCode = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{1,63}$")]
ParamValue = str | int | bool | None


class Reason(BaseModel):
    """Why something was refused or must be revised: a code and flat parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: ReasonCode = Field(description="Stable machine-readable code, e.g. `amount_changed`.")
    params: dict[str, ParamValue] = Field(
        default_factory=dict, description="Flat, safe parameters for rendering the reason."
    )


# Reason codes the lifecycle itself emits; operations add their own.
APPROVAL_STALE = "approval_stale"
#: at execution, the approver is no longer a member, or no longer in a role the operation accepts
APPROVER_NO_LONGER_AUTHORIZED = "approver_no_longer_authorized"
NOT_FOUND = "not_found"
