"""The decisions of the proposal lifecycle, pure and synchronous.

What an approval (or decline) answers for each status, which statuses an outcome may move a
proposal out of, and which audit action and event each step writes. The I/O modules ask these
functions and never branch on statuses themselves, so ``tests/unit`` can pin the DESIGN table.
``step`` turns the lifecycle table (``signoff_contracts.status``) into what a move writes — its
audit action, its event, its clock condition — for ``transitions``, the one code that moves a
proposal.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.status import (
    COMPLETED,
    IN_PROGRESS,
    TRANSITIONS,
    ProposalStatus,
    check_transition,
)
from signoff_contracts.v2 import ApprovalResult

SYSTEM_ACTOR = "system:proposals"
MAX_PAGE = 100

EventName = Literal["created", "decided", "executing", "outcome", "superseded", "expired"]

HTTP_STATUS: dict[ApprovalResult, int] = {
    "claimed": 200,
    "approval_recorded": 200,
    "declined": 200,
    "withdrawn": 200,
    "revised": 200,
    "resolved": 200,
    "already_completed": 200,
    "not_approvable": 409,
    "forbidden": 403,
    "not_found": 404,
    "unauthenticated": 401,
    "invalid": 422,
    "rate_limited": 429,
}


@dataclass(frozen=True, slots=True)
class Answer:
    """What to reply: a result, its HTTP status, an optional reason code, the stored outcome?"""

    result: ApprovalResult
    reason: str | None = None
    with_outcome: bool = False
    http_status: int | None = None

    @property
    def status_code(self) -> int:
        return self.http_status if self.http_status is not None else HTTP_STATUS[self.result]


UNAUTHENTICATED = Answer("unauthenticated")
FORBIDDEN = Answer("forbidden")
NOT_FOUND = Answer("not_found")
CLAIMED = Answer("claimed")
#: an approval counted toward its policy's quorum, which is not complete yet
APPROVAL_RECORDED = Answer("approval_recorded")
#: the answers that carry the approval counts
COUNTED = (CLAIMED, APPROVAL_RECORDED)
DECLINED = Answer("declined")
WITHDRAWN = Answer("withdrawn")
ALREADY_COMPLETED = Answer("already_completed", with_outcome=True)
IN_PROGRESS_ANSWER = Answer("not_approvable", reason="in_progress")
INVALID_MESSAGE = Answer("invalid", reason="invalid_message")


def answer_for(status: ProposalStatus) -> Answer | None:
    """The DESIGN table for a proposal that is *not* pending; ``None`` means "go on and try"."""
    if status is ProposalStatus.PENDING:
        return None
    if status in IN_PROGRESS:
        return IN_PROGRESS_ANSWER
    if status in COMPLETED:
        return ALREADY_COMPLETED
    return Answer("not_approvable", reason=status.value)


def answer_after_lost_claim(status: ProposalStatus, lapsed: bool) -> Answer:
    """The conditional UPDATE matched nothing: answer from the row as it is now.

    A row still ``pending`` lost only to its clock (``lapsed``) — it is expired, whether or not the
    sweeper has marked it yet. Pending and not lapsed cannot lose a claim under READ COMMITTED;
    should it ever, the safe answer is "someone else is on it".
    """
    if status is ProposalStatus.PENDING:
        return Answer("not_approvable", reason="expired") if lapsed else IN_PROGRESS_ANSWER
    answer = answer_for(status)
    assert answer is not None
    return answer


def status_for_outcome(outcome: OperationOutcome) -> ProposalStatus:
    """Outcome tags are named after the statuses they lead to."""
    return ProposalStatus(outcome.type)


def outcome_sources(target: ProposalStatus) -> frozenset[ProposalStatus]:
    """The statuses an outcome may move a proposal out of to reach ``target``."""
    sources = frozenset(status for status in IN_PROGRESS if target in TRANSITIONS[status])
    for status in sources:
        check_transition(status, target)
    return sources


def event_for(status: ProposalStatus) -> EventName:
    """The ``ProposalEvent`` a transition into ``status`` announces (``proposal.<event>``)."""
    events: dict[ProposalStatus, EventName] = {
        ProposalStatus.PENDING: "created",
        ProposalStatus.DECLINED: "decided",
        ProposalStatus.WITHDRAWN: "decided",
        ProposalStatus.EXPIRED: "expired",
        ProposalStatus.SUPERSEDED: "superseded",
        ProposalStatus.EXECUTING: "executing",
    }
    return events.get(status, "outcome")


Clock = Literal["unexpired", "lapsed"]


@dataclass(frozen=True, slots=True)
class Step:
    """One move of the lifecycle table and everything it writes besides the new status.

    ``action`` names its audit row, ``event`` the ``ProposalEvent`` it announces; ``clock`` is the
    condition on ``expires_at`` its UPDATE carries (by the database clock): a person's move out
    of ``pending`` needs the proposal unexpired, expiry needs it lapsed. A claim (into
    ``executing``) also sends the signed execution contract.
    """

    source: ProposalStatus | None
    target: ProposalStatus
    action: str
    event: EventName
    clock: Clock | None = None

    @property
    def sends_contract(self) -> bool:
        return self.target is ProposalStatus.EXECUTING


#: a proposal comes into being ``pending``: audited ``created``, announced ``proposal.created``
CREATION = Step(None, ProposalStatus.PENDING, "created", "created")


def step(source: ProposalStatus, target: ProposalStatus) -> Step:
    """The table's move ``source → target``; ``IllegalTransition`` if the table has none."""
    check_transition(source, target)
    clock: Clock | None = None
    if source is ProposalStatus.PENDING:
        clock = "lapsed" if target is ProposalStatus.EXPIRED else "unexpired"
    if target is ProposalStatus.EXECUTING:
        action = "claimed"
    elif source in IN_PROGRESS:
        action = "outcome"
    else:
        action = target.value
    return Step(source, target, action, event_for(target), clock)


def routing_key(event: EventName) -> str:
    return f"proposal.{event}"


def page_size(requested: int | None, default: int = 50) -> int:
    return max(1, min(MAX_PAGE, requested if requested is not None else default))


class InvalidCursor(ValueError):
    pass


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, prefix: str = "prp") -> str:
    """The last id of the previous page; ``prefix`` is the kind of id the list pages through."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursor(cursor) from None
    if not raw.startswith(f"{prefix}_") or len(raw) > 48:
        raise InvalidCursor(cursor)
    return raw


def page(rows: Sequence[Any], size: int, view: Callable[[Any], BaseModel]) -> dict[str, Any]:
    """One page of a list fetched with ``size + 1`` rows: the items and the next cursor."""
    shown = rows[:size]
    return {
        "items": [view(row).model_dump(mode="json") for row in shown],
        "next_cursor": encode_cursor(shown[-1].id) if len(rows) > size else None,
    }
