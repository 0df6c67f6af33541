"""Every sentence the application itself writes into a conversation, in English and French.

App-authored messages are stored as a code and parameters, never as prose, and rendered here
when read, in the locale of whoever reads them (their membership says which). A reason inside
the parameters (``{"reason": {"code", "params"}, "kind": …}``) is rendered by the operation's
own reason templates when it has one, else by the lifecycle's below, else named by its code.
A success's stored result (``{"result": …, "kind", "version"}``) is rendered by the operation's
own ``render_result``; a result that no longer parses (or an unknown operation) falls back to the
generic sentence. The model reads the English rendering of the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from signoff_contracts.operations import Locale
from signoff_runtime.registry import Operations, UnknownOperation

log = structlog.get_logger(__name__)

MESSAGES: dict[str, dict[Locale, str]] = {
    "approved_by": {"en": "(Approved by {names}.)", "fr": "(Approuvée par {names}.)"},
    "proposal_ready": {
        "en": "I have prepared a proposal for your approval: review the card. "
        "Nothing happens unless someone approves it.",
        "fr": "J'ai préparé une proposition à approuver : consultez la carte. "
        "Rien ne se passe tant que personne ne l'approuve.",
    },
    "proposal_revised": {
        "en": "The proposal was revised; this card replaces the previous one.",
        "fr": "La proposition a été révisée ; cette carte remplace la précédente.",
    },
    "proposal_succeeded": {
        "en": "Done: the approved proposal was carried out.",
        "fr": "C'est fait : la proposition approuvée a été exécutée.",
    },
    "proposal_succeeded_result": {
        "en": "Done: {result}",
        "fr": "C'est fait : {result}",
    },
    "proposal_needs_reconciliation": {
        "en": "Waiting for confirmation: the result of the approved proposal is not certain "
        "yet, so signoff keeps checking with the provider (nothing is sent twice) until the "
        "provider or an operator confirms it. Follow it at {status_path}.",
        "fr": "En attente de confirmation : le résultat de la proposition approuvée n'est pas "
        "encore certain, alors signoff continue de vérifier auprès du fournisseur (rien n'est "
        "envoyé deux fois) jusqu'à ce que le fournisseur ou un opérateur le confirme. "
        "Suivez-le sur {status_path}.",
    },
    "proposal_revision_required": {
        "en": "The approved proposal was not carried out: {reason} Nothing was changed. "
        "Ask me to look again and I will prepare a new one.",
        "fr": "La proposition approuvée n'a pas été exécutée : {reason} Rien n'a été modifié. "
        "Demandez-moi de regarder à nouveau et j'en préparerai une nouvelle.",
    },
    "proposal_failed": {
        "en": "The approved proposal failed and will not be retried. "
        "Quote {correlation_id} to an operator.",
        "fr": "La proposition approuvée a échoué et ne sera pas relancée. "
        "Communiquez {correlation_id} à un opérateur.",
    },
    "proposal_declined": {
        "en": "The proposal was declined.",
        "fr": "La proposition a été refusée.",
    },
    "proposal_declined_reason": {
        "en": "The proposal was declined: “{decline_reason}”",
        "fr": "La proposition a été refusée : « {decline_reason} »",
    },
    "proposal_withdrawn": {
        "en": "The proposal was withdrawn.",
        "fr": "La proposition a été retirée.",
    },
    "proposal_withdrawn_reason": {
        "en": "The proposal was withdrawn: “{decline_reason}”",
        "fr": "La proposition a été retirée : « {decline_reason} »",
    },
    "proposal_expired": {
        "en": "The proposal expired before anyone decided on it.",
        "fr": "La proposition a expiré avant qu'une décision soit prise.",
    },
    "proposal_refused": {
        "en": "The proposal could not be recorded: {reason}",
        "fr": "La proposition n'a pas pu être enregistrée : {reason}",
    },
    "pause_point_refused": {
        "en": "I could not ask you: {reason}",
        "fr": "Je n'ai pas pu vous poser la question : {reason}",
    },
    "proposals_unavailable": {
        "en": "I could not confirm that the proposal was recorded. If it was, its card will "
        "appear here; otherwise, please ask again.",
        "fr": "Je n'ai pas pu confirmer l'enregistrement de la proposition. Si elle l'a été, "
        "sa carte apparaîtra ici ; sinon, redemandez-le.",
    },
    "invalid_calls_exhausted": {
        "en": "I could not prepare a valid request after {tries} tries (last problem: {reason}). "
        "Nothing was proposed. Please rephrase or give me more details.",
        "fr": "Je n'ai pas réussi à préparer une demande valide en {tries} essais (dernier "
        "problème : {reason}). Rien n'a été proposé. Reformulez ou précisez votre demande.",
    },
    "model_unavailable": {
        "en": "The assistant is unavailable right now ({cause}). Nothing was changed; "
        "please try again in a moment.",
        "fr": "L'assistant est indisponible pour le moment ({cause}). Rien n'a été modifié ; "
        "réessayez dans un instant.",
    },
    "turn_limit": {
        "en": "The assistant took too many steps without finishing. Nothing was proposed; "
        "please try again.",
        "fr": "L'assistant a fait trop d'étapes sans conclure. Rien n'a été proposé ; réessayez.",
    },
    "pause_point_card": {
        "en": "I need your decision before I go on: see the card.",
        "fr": "J'ai besoin de votre décision pour continuer : voyez la carte.",
    },
    "pause_point_expired": {
        "en": "The question expired before it was answered; I did not go on.",
        "fr": "La question a expiré sans réponse ; je n'ai pas continué.",
    },
    "turn_failed": {
        "en": "Something went wrong on our side; nothing was changed. "
        "Quote {correlation_id} if it happens again.",
        "fr": "Un problème est survenu de notre côté ; rien n'a été modifié. "
        "Communiquez {correlation_id} si cela se reproduit.",
    },
    "membership_ended": {
        "en": "The person this conversation belongs to is no longer a member; "
        "the assistant did not go on.",
        "fr": "La personne à qui appartient cette conversation n'est plus membre ; "
        "l'assistant n'a pas continué.",
    },
}

CAUSES: dict[str, dict[Locale, str]] = {
    "model_timeout": {"en": "no answer in time", "fr": "pas de réponse à temps"},
    "model_rate_limited": {"en": "too many requests", "fr": "trop de requêtes"},
    "model_unavailable": {"en": "the model service is down", "fr": "le service est en panne"},
    "model_bad_response": {"en": "an unreadable answer", "fr": "une réponse illisible"},
}

#: reasons the lifecycle (not an operation) gives
REASONS: dict[str, dict[Locale, str]] = {
    "approval_stale": {
        "en": "the approval came too late to run safely.",
        "fr": "l'approbation est arrivée trop tard pour être exécutée sans risque.",
    },
    "approver_no_longer_authorized": {
        "en": "the person who approved it may no longer approve it, so it did not run.",
        "fr": "la personne qui l'a approuvé n'en a plus le droit ; rien n'a été exécuté.",
    },
    "conversation_quota_exceeded": {
        "en": "this conversation already has {limit} cards waiting for a decision. "
        "Decide on those first.",
        "fr": "cette conversation a déjà {limit} cartes en attente de décision. "
        "Décidez-en d'abord.",
    },
    "organization_quota_exceeded": {
        "en": "your organization has reached its limit of {limit} cards waiting for a decision.",
        "fr": "votre organisation a atteint sa limite de {limit} cartes en attente.",
    },
    "invalid_arguments": {
        "en": "the request did not fit the tool.",
        "fr": "la demande ne correspondait pas à l'outil.",
    },
    "forbidden": {
        "en": "your role may not propose this change; someone who may must ask for it.",
        "fr": "votre rôle ne permet pas de proposer ce changement ; une personne habilitée "
        "doit le demander.",
    },
    "not_a_member": {
        "en": "you are no longer a member of this organization.",
        "fr": "vous n'êtes plus membre de cette organisation.",
    },
    "rate_limited": {
        "en": "too many proposals in a short time; try again in {retry_after_s} s.",
        "fr": "trop de propositions en peu de temps ; réessayez dans {retry_after_s} s.",
    },
    "unauthenticated": {
        "en": "your sign-in could not be confirmed; sign in again.",
        "fr": "votre connexion n'a pas pu être confirmée ; reconnectez-vous.",
    },
    "resumed_from_not_usable": {
        "en": "too much time has passed since your answer; please ask again.",
        "fr": "trop de temps a passé depuis votre réponse ; redemandez-le.",
    },
}


class _Missing(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "…"


def _fill(template: str, params: Mapping[str, Any]) -> str:
    return template.format_map(_Missing(params))


def render_reason(
    reason: Mapping[str, Any], kind: str | None, locale: Locale, operations: Operations | None
) -> str:
    code = str(reason.get("code", ""))
    params = reason.get("params") or {}
    templates: Mapping[str, Mapping[Locale, str]] = {}
    if kind and operations is not None:
        try:
            templates = operations.latest(kind).reasons
        except UnknownOperation:
            templates = {}
    template = templates.get(code) or REASONS.get(code)
    if template is None:
        return {"en": "reason code {code}.", "fr": "code de motif {code}."}[locale].format(
            code=code
        )
    return _fill(template[locale], params)


def render_result(
    params: Mapping[str, Any], locale: Locale, operations: Operations | None
) -> str | None:
    """What a success did, in the operation's own words, or ``None`` when the stored result
    cannot say it (no result, an unknown operation or version, a result that does not parse)."""
    kind, result, version = params.get("kind"), params.get("result"), params.get("version")
    if operations is None or not isinstance(kind, str) or result is None:
        return None
    try:
        op = operations.get(kind, version) if isinstance(version, int) else operations.latest(kind)
        said = op.render_result(op.parse_result(result), locale)
    except UnknownOperation:
        return None
    except Exception:  # an old or odd stored result: the generic sentence still says it
        log.warning("texts.result_not_rendered", kind=kind, version=version, exc_info=True)
        return None
    return said if isinstance(said, str) and said.strip() else None


def render(
    code: str, params: Mapping[str, Any], locale: Locale, operations: Operations | None = None
) -> str:
    """The app message ``code`` in ``locale`` (an unknown code renders as itself)."""
    values: dict[str, Any] = dict(params)
    if code == "proposal_succeeded":
        said = render_result(params, locale, operations)
        if said is not None:
            code, values["result"] = "proposal_succeeded_result", said
    if isinstance(params.get("reason"), Mapping):
        values["reason"] = render_reason(params["reason"], params.get("kind"), locale, operations)
    if "cause" in params:
        values["cause"] = CAUSES.get(str(params["cause"]), {}).get(locale, str(params["cause"]))
    if code in ("proposal_declined", "proposal_withdrawn") and params.get("decline_reason"):
        code = f"{code}_reason"
    template = MESSAGES.get(code)
    said = code if template is None else _fill(template[locale], values)
    approvers = params.get("approved_by")
    if isinstance(approvers, list) and approvers:
        names = _listed([str(n) for n in approvers], locale)
        said += " " + MESSAGES["approved_by"][locale].format(names=names)
    return said


def _listed(names: list[str], locale: Locale) -> str:
    """``Morgan Lee and Sam Roy`` / ``A, B and C`` (``et`` in French)."""
    last = {"en": " and ", "fr": " et "}[locale]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + last + names[-1]
