"""What a card shows: the operation's own fixed preview template, status, outcome, actions.

A proposal card renders its frozen preview with ``render_preview`` in the viewer's locale: title,
labels and structure are the operation's own; content fields (a drafted subject or body) are data
shown verbatim and escaped, as approved. Whether the approve and decline buttons appear is the
operation's own ``authorize`` for the viewer's role (the proposals service decides again on every
command; the buttons are only a courtesy). The withdraw button appears on one's own pending
proposals. A finished card has no actions at all.

A proposal whose approval policy needs more than one person shows how far it is ("needs 2
approvals: 1 of 2") and who approved; Approve is hidden from a person who already approved
("waiting for another approver") or whose approval the policy does not count (the proposer under
approver ≠ proposer, a role the policy leaves out). Declining stays with every eligible person.
"""

from __future__ import annotations

import json
from typing import Any

from signoff_contracts.operations import Actor, Locale, Scope
from signoff_runtime.registry import Operations, UnknownOperation

from signoff_web import texts
from signoff_web.richtext import markdown as markdown  # model text, links made safe
from signoff_web.sessions import Session

FINAL = {
    "succeeded",
    "failed",
    "declined",
    "withdrawn",
    "expired",
    "superseded",
    "revision_required",
}


def proposal(
    view: dict[str, Any],
    session: Session,
    operations: Operations,
    names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``names``: display names of the people who approved, by user id (else their ids)."""
    locale: Locale = session.locale
    status = str(view["status"])
    card: dict[str, Any] = {
        "type": "proposal",
        "id": view["id"],
        "status": status,
        "status_text": texts.status(status, locale),
        "final": status in FINAL,
        "expires_at": view["expires_at"],
        "superseded_by": view.get("superseded_by"),
        "decline_reason": view.get("decline_reason"),
        "conversation_id": view.get("conversation_id"),
        "outcome": None,
        "title": view["operation_kind"],
        "lines": [],
        "can_decide": False,
        "can_approve": False,
        "approvals": approvals(view, session, names or {}),
        # the proposer may take their own pending proposal back (the service checks again)
        "can_withdraw": status == "pending" and view.get("requested_by") == session.user_id,
        "edit_fields": [],
    }
    try:
        op = operations.get(view["operation_kind"], view["contract_version"])
    except UnknownOperation:
        card["outcome"] = _outcome(view.get("outcome"), locale, card["title"], None)
        return card
    rendered = op.render_preview(op.parse_preview(view["preview"]), locale)
    card["title"] = rendered.title
    card["lines"] = [(line.label, line.value) for line in rendered.lines]
    card["outcome"] = _outcome(view.get("outcome"), locale, rendered.title, op)
    actor = Actor(
        user_id=session.user_id, organization_id=session.organization_id, role=session.role
    )
    scope = Scope(
        organization_id=view["organization_id"],
        section=view["section"],
        resource_id=view["resource_id"],
    )
    card["can_decide"] = status == "pending" and op.authorize(actor, scope)
    quorum = card["approvals"]
    card["can_approve"] = card["can_decide"] and not (quorum["mine"] or quorum["barred"])
    if quorum["barred"] == "role_not_counted":
        card["can_decide"] = False  # nor may they decline: the policy leaves their role out
    if card["can_decide"]:
        asked = view.get("request") or {}
        card["edit_fields"] = [
            {**f, "value": _shown(asked.get(f["name"]))}
            for f in schema_fields(op.Request.model_json_schema())
        ]
    return card


def approvals(view: dict[str, Any], session: Session, names: dict[str, str]) -> dict[str, Any]:
    """The approval policy's progress as the card shows it, and the viewer's place in it:
    ``mine`` (they approved), ``barred`` (why the policy does not count them, or ``None``)."""
    need = view.get("requirement") or {}
    marks = view.get("approvals") or []
    barred = None
    if view.get("requested_by") == session.user_id and not need.get("proposer_may_approve", True):
        barred = "proposer_may_not_approve"
    elif need.get("roles") is not None and session.role not in need["roles"]:
        barred = "role_not_counted"
    return {
        "required": int(need.get("required", 1)),
        "recorded": len(marks),
        "names": [names.get(m["user_id"], m["user_id"]) for m in marks],
        "mine": any(m["user_id"] == session.user_id for m in marks),
        "barred": barred,
    }


async def approver_names(
    directory: Any, engine: Any, organization_id: str, views: list[dict[str, Any]]
) -> dict[str, str]:
    """Display names of everyone who approved one of ``views``, from the ``signoff.directory``
    (one connection, only when some card has an approval)."""
    wanted = {m["user_id"] for v in views for m in v.get("approvals") or []}
    if not wanted:
        return {}
    found = {}
    async with engine.connect() as conn:
        for user_id in sorted(wanted):
            member = await directory.membership(conn, user_id, organization_id)
            if member is not None and member.display_name:
                found[user_id] = member.display_name
    return found


def _shown(value: Any) -> str:
    """A request's value as a form shows it (an edit starts from what was asked)."""
    return "" if value is None or isinstance(value, dict | list) else str(value)


def pause_point(view: dict[str, Any], session: Session) -> dict[str, Any]:
    status = str(view["status"])
    return {
        "type": "pause_point",
        "id": view["id"],
        "status": status,
        "status_text": texts.status(status, session.locale),
        "final": status != "pending",
        "kind": view["kind"],
        "title": view["title"],
        "description": markdown(view.get("description")),
        "options": list(view.get("options") or []),
        "expires_at": view["expires_at"],
        "resolution": view.get("resolution"),
        "fields": schema_fields(view.get("form_schema") or {}),
        "can_decide": status == "pending",
        # shown as data (the template escapes it) and, while pending, editable before answering
        "payload": payload_text(view.get("payload")),
        "edited_payload": payload_text((view.get("resolution") or {}).get("payload")),
    }


def payload_text(payload: Any) -> str | None:
    """A payload as the card shows and edits it: indented JSON (``None``: there is none)."""
    if payload is None:
        return None
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True)


def schema_fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Form fields for a flat JSON schema: enums become selects, numbers number inputs."""
    required = set(schema.get("required") or [])
    defs = schema.get("$defs") or {}
    fields = []
    for name, prop in (schema.get("properties") or {}).items():
        if "$ref" in prop:
            prop = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        fields.append(
            {
                "name": str(name),
                "label": str(prop.get("title") or name),
                "enum": [str(v) for v in prop.get("enum") or []],
                "input": "number" if kind in ("integer", "number") else "text",
                "kind": kind,
                "required": name in required,
            }
        )
    return fields


def coerce(fields: list[dict[str, Any]], form: dict[str, str]) -> dict[str, Any]:
    """The typed data of a submitted form; what does not parse goes as typed, so the server's
    validation (the authority) names the problem."""
    data: dict[str, Any] = {}
    for field in fields:
        raw = form.get(f"f_{field['name']}", "").strip()
        if raw == "":
            continue
        if field["kind"] == "integer":
            data[field["name"]] = int(raw) if raw.lstrip("-").isdigit() else raw
        elif field["kind"] == "number":
            try:
                data[field["name"]] = float(raw)
            except ValueError:
                data[field["name"]] = raw
        else:
            data[field["name"]] = raw
    return data


def _outcome(
    outcome: dict[str, Any] | None, locale: Locale, title: str, op: Any
) -> dict[str, Any] | None:
    """The outcome line: what was done, in the person's words — the operation's own rendering
    of its result where it has one (``render_result``), else the web's sentence for the kind."""
    if not outcome:
        return None
    kind = str(outcome.get("type"))
    shown: dict[str, Any] = {"type": kind, "text": ""}
    detail = ""
    if kind == "succeeded":
        rendered = _rendered_result(op, outcome.get("result"), locale)
        if rendered:
            shown["text"] = texts.outcome("succeeded_result", locale, result=rendered)
            return shown
    elif kind == "needs_reconciliation":
        shown["status_path"] = outcome.get("status_path")
    elif kind == "revision_required":
        reason = outcome.get("reason") or {}
        code = str(reason.get("code", ""))
        detail = code
        if op is not None and code in op.reasons:
            try:
                detail = op.reasons[code][locale].format(**(reason.get("params") or {}))
            except (KeyError, IndexError, ValueError):
                pass
    elif kind == "failed":
        detail = str(outcome.get("correlation_id", ""))
    shown["text"] = texts.outcome(kind, locale, title=title, detail=detail)
    return shown


def _rendered_result(op: Any, result: Any, locale: Locale) -> str | None:
    """The operation's ``render_result`` of the stored result (every loaded operation has
    one: ``check_operation``), or ``None`` for an unknown operation or a result that does not
    parse."""
    if op is None or result is None:
        return None
    try:
        said = op.render_result(op.parse_result(result), locale)
    except Exception:  # an old or odd stored result: the generic sentence still says it
        return None
    return said if isinstance(said, str) and said.strip() else None
