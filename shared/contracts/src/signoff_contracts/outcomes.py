"""The outcome vocabulary: the four things that can become of an approved contract.

``Succeeded`` carries the operation's typed result (as JSON at this boundary; the operation's
``Result`` model parses it back). The application classifies every outcome, never the model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from signoff_contracts.reasons import Reason


class _Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Succeeded(_Outcome):
    type: Literal["succeeded"] = "succeeded"
    result: dict[str, Any] = Field(description="The operation's typed `Result`, as JSON.")


class NeedsReconciliation(_Outcome):
    type: Literal["needs_reconciliation"] = "needs_reconciliation"
    status_path: str = Field(description="HTTP path showing the uncertain attempt and its checks.")


class RevisionRequired(_Outcome):
    type: Literal["revision_required"] = "revision_required"
    reason: Reason


class TerminalFailure(_Outcome):
    type: Literal["failed"] = "failed"
    correlation_id: str = Field(description="Quote this to an operator; details are in the logs.")


OperationOutcome = Annotated[
    Succeeded | NeedsReconciliation | RevisionRequired | TerminalFailure,
    Field(discriminator="type"),
]
outcome_adapter: TypeAdapter[OperationOutcome] = TypeAdapter(OperationOutcome)
