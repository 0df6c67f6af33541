"""The machine-facing propose endpoint: ``POST /v1/operations/{kind}/propose``.

The same path the assistants' propose tools take: parse the request into the operation's
``Request`` (unknown fields refused, the field errors answered at once) and send it, with the
caller's bearer token, to the proposals service by request-reply; that service authenticates the
caller, runs the operation's ``resolve`` and stores the contract it made. The answer is ``201``
only once the proposal is stored, so an immediate ``GET`` finds it. A refusal keeps its HTTP
meaning: the operation's own reason codes and a quota are ``422``, a role that may not propose
``403``, the caller's proposal rate ``429`` with ``Retry-After``.

A client that did not hear the answer (a timeout, a ``503``) may send the request again with
the same ``Idempotency-Key`` header: the key stands for one proposal id per person, so the retry
answers with the proposal the first request stored instead of a second card for the same case.
The same key with a different request is refused (``422 idempotency_key_reused``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import structlog
from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from signoff_contracts.operations import Rejected
from signoff_runtime.members import current_member
from signoff_runtime.openapi import ok
from signoff_runtime.problems import Problem, problem_response
from signoff_runtime.registry import UnknownOperation
from signoff_runtime.tokens import AGENT_AUDIENCE, bearer
from signoff_runtime.validation import problem_errors

from signoff_agent import repository as repo
from signoff_agent.bodies import Proposed
from signoff_agent.proposing import NotStored, OnBehalf, ProposalsUnavailable, Proposer

log = structlog.get_logger(__name__)
router = APIRouter()


class ProposeBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resource_id: str = Field(min_length=1, max_length=128)
    request: dict[str, Any]


@router.post(
    "/v1/operations/{kind}/propose",
    status_code=201,
    **ok(Proposed, 403, 404, 422, 429, 503, status=201),
)
async def propose_operation(
    kind: str,
    body: ProposeBody,
    request: Request,
    authorization: str | None = Header(default=None),
    idempotency_key: str | None = Header(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[\x21-\x7e]+$",
        description="Makes a retry safe: the same key (per person) answers with the same proposal.",
    ),
) -> JSONResponse:
    proposer: Proposer = request.app.state.proposer
    try:
        op = proposer.operations.latest(kind)
    except UnknownOperation:
        raise Problem(404, "unknown_operation", f"No operation is called {kind!r}.") from None
    proposal_id = first = digest = None
    # one connection for the caller and the key, in autocommit: each statement stands alone
    # (the key's insert and read agree without a transaction), so no BEGIN or COMMIT round trip
    async with proposer.engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        member = await current_member(
            proposer.auth, proposer.directory, conn, authorization, audience=AGENT_AUDIENCE
        )
        if idempotency_key is not None:
            digest = _digest(kind, body)
            proposal_id, first = await repo.keyed_proposal(
                conn, member.organization_id, member.user_id, idempotency_key, digest
            )
    if first != digest:
        raise Problem(
            422,
            "idempotency_key_reused",
            "This Idempotency-Key was used with a different request.",
        )
    try:
        parsed = op.parse_request(body.request)
    except ValidationError as exc:
        raise Problem(
            422,
            "invalid_request",
            "The request does not fit the operation.",
            errors=problem_errors(exc),
        ) from None
    try:
        created = await proposer.propose(
            op,
            OnBehalf(token=bearer(authorization)),
            body.resource_id,
            parsed,
            locale=member.locale,
            proposal_id=proposal_id,
        )
    except NotStored as exc:
        return _refused(exc)
    except Rejected as exc:
        raise Problem(
            422,
            exc.reason.code,
            "The operation cannot be proposed as asked.",
            params=exc.reason.params,
        ) from None
    except ProposalsUnavailable as exc:
        raise Problem(
            503,
            "proposals_unavailable",
            "The proposal could not be confirmed as stored; check it by id.",
            proposal_id=exc.proposal_id,
        ) from None
    return JSONResponse(
        created, status_code=201, headers={"Location": f"/v1/proposals/{created['proposal']['id']}"}
    )


_REFUSALS = {
    "unauthenticated": (401, "A valid bearer token is required."),
    "forbidden": (403, "You may not propose this operation."),
    "rate_limited": (429, "Too many proposals; try again later."),
}


def _refused(exc: NotStored) -> JSONResponse:
    """The proposals service's refusal, as the HTTP answer it stands for (else ``422``)."""
    status, title = _REFUSALS.get(exc.refusal, (422, "The operation cannot be proposed as asked."))
    code = exc.reason.code if status == 422 else exc.refusal
    response = problem_response(Problem(status, code, title, params=exc.reason.params))
    if status == 429:
        response.headers["Retry-After"] = str(exc.reason.params.get("retry_after_s", 1))
    return response


def _digest(kind: str, body: ProposeBody) -> str:
    canonical = json.dumps(
        {"kind": kind, **body.model_dump(mode="json")}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
