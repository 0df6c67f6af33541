"""signoff-client: put signoff's contracts and approvals in front of any Python agent.

    from signoff_client import SignoffClient

    with SignoffClient(agent_url, proposals_url, token) as signoff:
        proposed = signoff.propose("order.refund_missing_discount", order_id, request)
        done = signoff.wait(proposed.proposal.id, timeout=600)   # a person decides in signoff
        print(done.status, done.outcome)

Errors are ``SignoffError`` subclasses carrying the problem document's ``code``. Transient
failures (a lost connection, ``502``/``503``/``504``) are retried; a propose carries an
``Idempotency-Key`` (yours, or one the client makes) so a retry never stores a second proposal.
"""

from signoff_client.client import AsyncSignoffClient, SignoffClient
from signoff_client.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
    SignoffError,
    Unauthenticated,
    Unavailable,
    WaitTimeout,
)
from signoff_client.models import ApprovalReply, Operation, Proposal, Proposed

__all__ = [
    "ApprovalReply",
    "AsyncSignoffClient",
    "Conflict",
    "Forbidden",
    "Invalid",
    "NotFound",
    "Operation",
    "Proposal",
    "Proposed",
    "RateLimited",
    "SignoffClient",
    "SignoffError",
    "Unauthenticated",
    "Unavailable",
    "WaitTimeout",
]
