"""``email_broadcast.apply_draft``: copy a drafted email into a broadcast's editable form.

Approval never sends anything: the segments' filters, the subject and the body land in the
form, where the club still reviews and sends the broadcast itself. It is a local operation —
the form's change commits with the outcome — yet it recounts the audience first: the manager
approved a draft for *that many* people, and if the segments have grown or shrunk since,
they need a new proposal (``audience_changed``), not a silently different mailing.

Another draft applied (or the form edited) after this one was prepared: the form's
``revision`` has moved, and this draft fails closed with ``broadcast_changed`` rather than
overwrite work the manager never saw. Applying is idempotent by proposal id: the form
remembers ``applied_proposal_id``, and a repeated execute returns the same result unchanged.
The result names the form, the subject and the audience count applied (``render_result`` says
them back) and the facts re-checked before applying (``RECHECKED``).

It is over 300 lines because an operation is one reviewable unit: its arguments, texts in
both locales, checks and SQL side by side, as every operation of the club is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from signoff_contracts.operations import (
    Actor,
    ExecutionContext,
    Locale,
    LocalOperation,
    PreviewLine,
    Rejected,
    RenderedPreview,
    Resolved,
    Scope,
)
from signoff_contracts.reasons import Reason
from signoff_runtime import hot
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import tables as t

SegmentId = Annotated[str, StringConstraints(min_length=1, max_length=72)]


class DraftRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    segment_ids: list[SegmentId] = Field(
        min_length=1,
        max_length=20,
        description="The segments (seg_…) whose members receive the broadcast; no repeats.",
    )
    subject: str = Field(min_length=1, max_length=200, description="The email's subject line.")
    body: str = Field(
        min_length=1, max_length=20_000, description="The email's body, as plain text/markdown."
    )

    @field_validator("segment_ids")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("segment_ids must not repeat")
        return value


class DraftArguments(BaseModel):
    """``form_revision`` is the form as it was when the draft was prepared (see docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    broadcast_id: str
    segment_ids: tuple[str, ...]
    subject: str
    body: str
    audience_count: int = Field(ge=0)
    form_revision: int = Field(ge=0)


class DraftPreview(BaseModel):
    model_config = ConfigDict(frozen=True)

    broadcast_name: str
    segment_names: tuple[str, ...]
    audience_count: int
    subject: str
    body: str


#: the facts ``revalidate`` proves again before the draft is applied
RECHECKED: tuple[str, ...] = ("broadcast_exists", "form_revision", "segments", "audience_count")


class DraftResult(BaseModel):
    """What was applied. Fields after ``audience_count`` came later and default, so results
    stored before them still parse."""

    model_config = ConfigDict(frozen=True)

    broadcast_id: str
    audience_count: int
    broadcast_name: str | None = None
    subject: str | None = None
    rechecked: tuple[str, ...] = ()


_TEXT: dict[Locale, dict[str, str]] = {
    "en": {
        "title": "Copy this draft into the broadcast form (nothing is sent)",
        "form": "Broadcast",
        "segments": "Segments",
        "audience": "Recipients",
        "audience_value": "{count} people",
        "subject": "Subject",
        "body": "Message",
        "done": "Copied the draft into the form “{form}”: subject “{subject}”, {count} "
        "recipients. Nothing was sent.",
        "done_unnamed": "Copied the draft into the broadcast form ({form}) for {count} "
        "recipients. Nothing was sent.",
    },
    "fr": {
        "title": "Copier ce brouillon dans le formulaire d'envoi (rien n'est envoyé)",
        "form": "Envoi",
        "segments": "Segments",
        "audience": "Destinataires",
        "audience_value": "{count} personnes",
        "subject": "Objet",
        "body": "Message",
        "done": "Brouillon copié dans le formulaire « {form} » : objet « {subject} », {count} "
        "destinataires. Rien n'a été envoyé.",
        "done_unnamed": "Brouillon copié dans le formulaire d'envoi ({form}) pour {count} "
        "destinataires. Rien n'a été envoyé.",
    },
}

REASONS: dict[str, dict[Locale, str]] = {
    "broadcast_not_found": {
        "en": "This broadcast was not found.",
        "fr": "Cet envoi est introuvable.",
    },
    "segment_not_found": {
        "en": "Segment {segment_id} was not found.",
        "fr": "Le segment {segment_id} est introuvable.",
    },
    "audience_changed": {
        "en": "The audience is now {current_count} people instead of {previous_count}.",
        "fr": "L'audience compte maintenant {current_count} personnes au lieu de {previous_count}.",
    },
    "broadcast_changed": {
        "en": "The broadcast form changed after this draft was prepared.",
        "fr": "Le formulaire d'envoi a changé depuis la préparation de ce brouillon.",
    },
}


class ApplyBroadcastDraft(LocalOperation[DraftRequest, DraftArguments, DraftPreview, DraftResult]):
    kind: ClassVar[str] = "email_broadcast.apply_draft"
    version: ClassVar[int] = 1
    section: ClassVar[str] = "email"
    resource: ClassVar[str] = "broadcast"
    summary: ClassVar[str] = "Copy a drafted email into a broadcast form, without sending it."
    title: ClassVar[dict[Locale, str]] = {
        "en": "Apply a broadcast draft",
        "fr": "Appliquer un brouillon d'envoi",
    }
    description: ClassVar[dict[Locale, str]] = {
        "en": "Copy a drafted subject and body into a broadcast form for one audience segment. "
        "Nothing is sent: a person sends the broadcast later.",
        "fr": "Copier un objet et un texte rédigés dans un formulaire d'envoi pour un segment. "
        "Rien n'est envoyé : une personne déclenche l'envoi plus tard.",
    }
    Request = DraftRequest
    Arguments = DraftArguments
    Preview = DraftPreview
    Result = DraftResult
    #: what an approval policy may test ("audience_count > …": docs, README "Approval policies")
    policy_facts: ClassVar[tuple[str, ...]] = ("audience_count",)
    reasons = REASONS
    #: granted to the executor (privileges.py)
    writes: ClassVar[tuple[str, ...]] = (t.broadcast_forms.name,)

    async def resolve(
        self, request: DraftRequest, scope: Scope, conn: AsyncConnection
    ) -> Resolved[DraftArguments, DraftPreview]:
        form = await _checked(conn, scope, request.segment_ids, lock=False)
        if form is None:
            raise Rejected("broadcast_not_found")
        found = _segments(form, request.segment_ids)
        if isinstance(found, Reason):
            raise Rejected(found.code, **found.params)
        names, audience = found
        arguments = DraftArguments(
            broadcast_id=scope.resource_id,
            segment_ids=tuple(request.segment_ids),
            subject=request.subject,
            body=request.body,
            audience_count=audience,
            form_revision=form.revision,
        )
        preview = DraftPreview(
            broadcast_name=form.name,
            segment_names=names,
            audience_count=audience,
            subject=request.subject,
            body=request.body,
        )
        return Resolved(arguments, preview)

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return actor.role == "manager" and actor.organization_id == scope.organization_id

    async def revalidate(
        self, arguments: DraftArguments, scope: Scope, conn: AsyncConnection
    ) -> Reason | None:
        """Lock the form and recount, in one statement (``_CHECK_LOCKED``): the form's lock is
        the transaction's only one (``execute``'s UPDATE finds it held), and the form's revision
        is read from its newest version once the lock is held. The audience is counted as of
        the statement's start: members joining after it are the sender's to see in the form —
        nothing is sent here, and the form's lock never covered the segments' members."""
        form = await _checked(conn, scope, arguments.segment_ids, lock=True)
        if form is None or arguments.broadcast_id != scope.resource_id:
            return Reason(code="broadcast_not_found")
        if form.revision != arguments.form_revision:
            return Reason(code="broadcast_changed")
        found = _segments(form, arguments.segment_ids)
        if isinstance(found, Reason):
            return found
        _, current = found
        if current != arguments.audience_count:
            return Reason(
                code="audience_changed",
                params={"previous_count": arguments.audience_count, "current_count": current},
            )
        return None

    async def execute(
        self, arguments: DraftArguments, scope: Scope, ctx: ExecutionContext, conn: AsyncConnection
    ) -> DraftResult:
        """One UPDATE, the segments' filters copied in by a subquery; only when it matches
        nothing (the form already holds this proposal's draft, or it vanished) one more
        statement reads the form."""
        applied = await hot.fetchrow(
            conn,
            _APPLY,
            scope.resource_id,
            scope.organization_id,
            arguments.subject,
            arguments.body,
            list(arguments.segment_ids),
            arguments.audience_count,
            ctx.proposal_id,
        )
        if applied is None:
            form = await _form(conn, scope)
            if form is None:
                raise LookupError(f"broadcast {scope.resource_id} vanished after revalidation")
            return DraftResult(
                broadcast_id=form.id,
                audience_count=form.audience_count,
                broadcast_name=form.name,
                subject=form.subject,
                rechecked=RECHECKED,
            )
        if applied["copied"] != len(arguments.segment_ids):  # raising rolls the UPDATE back
            raise LookupError(f"a segment of broadcast {applied['id']} vanished after revalidation")
        return DraftResult(
            broadcast_id=applied["id"],
            audience_count=arguments.audience_count,
            broadcast_name=applied["name"],
            subject=arguments.subject,
            rechecked=RECHECKED,
        )

    def render_preview(self, preview: DraftPreview, locale: Locale) -> RenderedPreview:
        text = _TEXT[locale]
        values = {
            "form": preview.broadcast_name,
            "segments": ", ".join(preview.segment_names),
            "audience": text["audience_value"].format(count=preview.audience_count),
            "subject": preview.subject,
            "body": preview.body,
        }
        lines = [PreviewLine(label=text[key], value=value) for key, value in values.items()]
        return RenderedPreview(title=text["title"], lines=lines)

    def render_result(self, result: DraftResult, locale: Locale) -> str:
        text = _TEXT[locale]
        if result.broadcast_name is None or result.subject is None:
            return text["done_unnamed"].format(
                form=result.broadcast_id, count=result.audience_count
            )
        return text["done"].format(
            form=result.broadcast_name, subject=result.subject, count=result.audience_count
        )


# The statements are hot ones (``signoff_runtime.hot``: fixed SQL, prepared once per connection)
# rather than SQLAlchemy Core built on every call: an approved draft runs two of them in the
# executor's transaction (the check, the UPDATE), and Core's per-statement work was most of the
# executor's CPU per contract (docs/benchmarks.md). A segment list is one array parameter, so
# each text is one prepared statement whatever the number of segments.
_B, _S, _M = t.broadcast_forms.fullname, t.segments.fullname, t.segment_members.fullname

#: the form, locked: what ``execute`` answers with when its UPDATE found the draft applied
_FORM_LOCKED = (
    f"SELECT id, name, subject, audience_count, revision FROM {_B} "  # noqa: S608
    "WHERE id = $1 AND organization_id = $2 FOR UPDATE"
)

#: the form (``$1``, ``$2``) with the segments' (``$3``) names by id and, over all of them, their
#: distinct audience: what resolving and revalidating a draft read, in one round trip
_CHECK = (
    "SELECT b.id, b.name, b.revision, "  # noqa: S608
    f"(SELECT jsonb_object_agg(s.id, s.name) FROM {_S} s "
    "WHERE s.organization_id = $2 AND s.id = ANY($3::text[])) AS segment_names, "
    f"(SELECT count(DISTINCT m.participant_id) FROM {_M} m JOIN {_S} a ON a.id = m.segment_id "
    "WHERE a.organization_id = $2 AND a.id = ANY($3::text[])) AS audience "
    f"FROM {_B} b WHERE b.id = $1 AND b.organization_id = $2"
)
_CHECK_LOCKED = _CHECK + " FOR UPDATE OF b"

#: the draft into the form, with the segments' ``{segment_id, name, filter}`` as a JSON array in
#: the order given (a segment no longer there is missing from it: ``copied`` tells)
_APPLY = (
    f"UPDATE {_B} b SET subject = $3, body = $4, segment_ids = $5::text[], "  # noqa: S608
    "filters = (SELECT coalesce(jsonb_agg(jsonb_build_object("
    "'segment_id', s.id, 'name', s.name, 'filter', s.filter) "
    f"ORDER BY array_position($5::text[], s.id)), '[]'::jsonb) FROM {_S} s "
    "WHERE s.organization_id = $2 AND s.id = ANY($5::text[])), "
    "audience_count = $6, applied_proposal_id = $7, revision = b.revision + 1, "
    "updated_at = now() "
    "WHERE b.id = $1 AND b.organization_id = $2 AND b.applied_proposal_id IS DISTINCT FROM $7 "
    "RETURNING b.id, b.name, jsonb_array_length(b.filters) AS copied"
)


async def _form(conn: AsyncConnection, scope: Scope) -> hot.Fields | None:
    row = await hot.fetchrow(conn, _FORM_LOCKED, scope.resource_id, scope.organization_id)
    return None if row is None else hot.Fields(row)


async def _checked(
    conn: AsyncConnection, scope: Scope, segment_ids: Sequence[str], *, lock: bool
) -> hot.Fields | None:
    """The form with the segments' names and audience (``_CHECK``); ``None``: no such form."""
    sql = _CHECK_LOCKED if lock else _CHECK
    row = await hot.fetchrow(conn, sql, scope.resource_id, scope.organization_id, list(segment_ids))
    return None if row is None else hot.Fields(row)


def _segments(form: hot.Fields, segment_ids: Sequence[str]) -> tuple[tuple[str, ...], int] | Reason:
    """The segments' names in the order given and their audience; or the first id not in the
    organization."""
    names: dict[str, str] = form.segment_names or {}
    missing = [sid for sid in segment_ids if sid not in names]
    if missing:
        return Reason(code="segment_not_found", params={"segment_id": missing[0]})
    return tuple(names[sid] for sid in segment_ids), int(form.audience)
