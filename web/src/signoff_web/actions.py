"""What a person does: open an assistant, talk, decide (approve, decline, edit, answer), withdraw.

Every form is checked for the session's CSRF token first. Decisions go to the proposals service
as AMQP commands carrying only opaque ids and the person's proposals-audience token; the reply
becomes a notice on the page the person came from. The web never decides anything itself: a
forged post reaches the proposals service, which refuses what the person's role does not allow.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from signoff_contracts.v1 import (
    ApproveProposal,
    DeclineProposal,
    ResolvePausePoint,
    ReviseProposal,
    WithdrawProposal,
)
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.registry import UnknownOperation
from signoff_runtime.rpc import Unanswered

from signoff_web import cards
from signoff_web.apis import ApiError
from signoff_web.context import apis, check_csrf, local_path, session, tokens
from signoff_web.errors import SectionNotServed
from signoff_web.sections import Catalogue
from signoff_web.sessions import Session

router = APIRouter()


async def _posted(request: Request) -> tuple[Session, dict[str, str]]:
    """The signed-in person and the form they posted, its CSRF token checked."""
    who = session(request)
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    check_csrf(who, form)
    return who, form


@router.post("/{section}/{resource_id}/chat")
async def open_chat(request: Request, section: str, resource_id: str) -> Response:
    """Open the section's assistant on a resource; the section must be one the agent serves."""
    who, _ = await _posted(request)
    bearer = tokens(request, who)
    catalogue: Catalogue = request.app.state.catalogue
    if await catalogue.get(bearer, section) is None:
        raise SectionNotServed(section)
    try:
        conversation_id = await apis(request).open_conversation(bearer, section, resource_id)
    except ApiError as exc:
        if exc.code == "unknown_section":  # the agent changed since the list was read
            raise SectionNotServed(section) from None
        raise
    return RedirectResponse(f"/chat/{conversation_id}", status_code=303)


@router.post("/chat/{conversation_id}/say")
async def say(request: Request, conversation_id: str) -> Response:
    who, form = await _posted(request)
    content = form.get("content", "").strip()[:8000]
    notice = ""
    if content:
        try:
            await apis(request).say(tokens(request, who), conversation_id, content)
        except ApiError as exc:
            if exc.status != 409:
                raise
            notice = "?notice=busy"
    return RedirectResponse(f"/chat/{conversation_id}{notice}#end", status_code=303)


@router.post("/proposals/{proposal_id}/approve")
async def approve(request: Request, proposal_id: str) -> Response:
    who, form = await _posted(request)
    return await _send(request, who, form, ApproveProposal, proposal_id=proposal_id)


@router.post("/proposals/{proposal_id}/decline")
async def decline(request: Request, proposal_id: str) -> Response:
    return await _end(request, proposal_id, DeclineProposal)


@router.post("/proposals/{proposal_id}/withdraw")
async def withdraw(request: Request, proposal_id: str) -> Response:
    """The proposer takes their pending proposal back (or a manager does, for them)."""
    return await _end(request, proposal_id, WithdrawProposal)


async def _end(
    request: Request, proposal_id: str, ending: type[DeclineProposal | WithdrawProposal]
) -> Response:
    """End a pending proposal, with the person's reason if they gave one."""
    who, form = await _posted(request)
    reason = form.get("reason", "").strip()[:500] or None
    return await _send(request, who, form, ending, proposal_id=proposal_id, reason=reason)


@router.post("/proposals/{proposal_id}/revise")
async def revise(request: Request, proposal_id: str) -> Response:
    """Re-run resolution on the edited request: the proposals service supersedes the old card."""
    who, form = await _posted(request)
    view = await apis(request).proposal(tokens(request, who), proposal_id)
    try:
        op = request.app.state.operations.get(view["operation_kind"], view["contract_version"])
    except UnknownOperation:
        raise HTTPException(404) from None
    edited = cards.coerce(cards.schema_fields(op.Request.model_json_schema()), form)
    return await _send(request, who, form, ReviseProposal, proposal_id=proposal_id, request=edited)


@router.post("/pause-points/{pause_point_id}/resolve")
async def resolve(request: Request, pause_point_id: str) -> Response:
    who, form = await _posted(request)
    action = form.get("action", "")
    if action not in ("approve", "decline", "option", "data"):
        raise HTTPException(422, "action")
    data = None
    payload: dict[str, Any] | None = None
    edited = form.get("payload")
    if action == "data" or edited is not None:
        view = await apis(request).pause_point(tokens(request, who), pause_point_id)
        if action == "data":
            data = cards.coerce(cards.schema_fields(view.get("form_schema") or {}), form)
        if edited is not None:
            try:
                payload = _edited_payload(edited, view.get("payload"))
            except ValueError:
                return _back(local_path(form.get("next"), "/inbox"), "invalid", "bad_payload", 422)
    return await _send(
        request,
        who,
        form,
        ResolvePausePoint,
        pause_point_id=pause_point_id,
        action=action,
        option=form.get("option") or None,
        data=data,
        reply=form.get("reply", "").strip()[:2000] or None,
        payload=payload,
    )


def _edited_payload(text: str, original: Any) -> dict[str, Any] | None:
    """The person's edit of the payload (a JSON object), or ``None`` when they left it as it
    was: only an edit travels as the payload override. ``ValueError`` if it is no object."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("the payload must be a JSON object")
    return None if value == original else value


Command = ApproveProposal | DeclineProposal | WithdrawProposal | ReviseProposal | ResolvePausePoint


async def _send(
    request: Request, who: Session, form: dict[str, str], kind: type[Command], /, **fields: Any
) -> Response:
    """Send the person's decision (``kind`` with ``fields``, carrying their own token) and go
    back where they came from with the reply."""
    command = kind(token=tokens(request, who).proposals, source="web", **fields)
    back = local_path(form.get("next"), "/inbox")
    try:
        reply = await request.app.state.commands.send(command)
    except Unanswered:
        return _back(back, "unavailable", "", 503)
    reason = _reason(reply)
    status = 303 if reply.http_status < 400 else reply.http_status
    return _back(back, reply.result, reason, status)


def _reason(reply: ApprovalReply) -> str:
    return reply.reason.code if reply.reason is not None else ""


def _back(path: str, result: str, reason: str, status: int) -> Response:
    """Back where the person came from, with the reply as a notice. A refusal keeps its HTTP
    status (a 403 stays a 403) but still lands on a page, via a tiny redirecting document."""
    base, _, anchor = path.partition("#")
    sep = "&" if "?" in base else "?"
    target = f"{base}{sep}notice={quote(result)}" + (f":{quote(reason)}" if reason else "")
    target += f"#{anchor}" if anchor else ""
    if status == 303:
        return RedirectResponse(target, status_code=303)
    safe = html.escape(target, quote=True)
    return Response(
        f'<!doctype html><meta http-equiv="refresh" content="0;url={safe}">'
        f'<a href="{safe}">{html.escape(result)}</a>',
        status_code=status,
        media_type="text/html",
    )
