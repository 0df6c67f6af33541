"""How conversations look to a viewer: messages rendered in the viewer's locale, cards.

App-authored messages are stored as codes; ``text`` is rendered here, on read, in the locale of
whoever reads (``texts``). User and assistant messages are shown as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from signoff_contracts.operations import Locale
from signoff_runtime.registry import Operations
from sqlalchemy import Row

from signoff_agent import texts


def message(row: Row[Any], locale: Locale, operations: Operations) -> dict[str, Any]:
    params = row.params or {}
    rendered = (
        texts.render(row.code or "", params, locale, operations)
        if row.role == "app"
        else row.content
    )
    return {
        "id": row.id,
        "seq": row.seq,
        "role": row.role,
        "synthetic": row.synthetic,
        "author": row.author,
        "text": rendered or "",
        "code": row.code,
        "params": params,
        "proposal_id": row.proposal_id,
        "pause_point_id": row.pause_point_id,
        "created_at": row.created_at.isoformat(),
    }


def card(row: Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "type": row.type,
        "status": row.status,
        "operation_kind": row.operation_kind,
        "replaced_by": row.replaced_by,
        "replaces": row.replaces,
        "updated_at": row.updated_at.isoformat(),
    }


def conversation(
    row: Row[Any],
    messages: Sequence[Row[Any]],
    cards: Sequence[Row[Any]],
    locale: Locale,
    operations: Operations,
) -> dict[str, Any]:
    return {
        "id": row.id,
        "section": row.section,
        "resource_id": row.resource_id,
        "created_by": row.created_by,
        "created_at": row.created_at.isoformat(),
        "turn_running": row.turn_id is not None,
        "messages": [message(m, locale, operations) for m in messages],
        "cards": {c.id: card(c) for c in cards},
    }
