"""Every word the web itself shows, in English and French; money and dates per locale.

One table for every string (over 300 lines, most of them translations), so a missing locale is
one place to look and the test that every key has every locale reads one dictionary.
"""

from __future__ import annotations

from datetime import UTC, datetime

from signoff_contracts.operations import Locale

__all__ = ["UI", "Locale", "money", "notice", "problem", "role", "status", "t", "when"]

UI: dict[str, dict[Locale, str]] = {
    "app": {"en": "signoff", "fr": "signoff"},
    "sign_in": {"en": "Sign in", "fr": "Se connecter"},
    "sign_out": {"en": "Sign out", "fr": "Se déconnecter"},
    "email": {"en": "Email", "fr": "Courriel"},
    "password": {"en": "Password", "fr": "Mot de passe"},
    "bad_credentials": {
        "en": "Unknown email or wrong password.",
        "fr": "Courriel inconnu ou mot de passe erroné.",
    },
    "signin_rate_limited": {
        "en": "Too many sign-in attempts. Try again in {seconds} seconds.",
        "fr": "Trop de tentatives de connexion. Réessayez dans {seconds} secondes.",
    },
    # the /leave page: a link a model wrote, to another site, opened only once the person asks
    "leave_title": {"en": "Leaving signoff", "fr": "Vous quittez signoff"},
    "leave_warning": {
        "en": "The assistant's message links to another site. Check the full address before "
        "you go: signoff does not vouch for it.",
        "fr": "Le message de l'assistant mène à un autre site. Vérifiez l'adresse complète "
        "avant d'y aller : signoff ne s'en porte pas garant.",
    },
    "leave_host": {"en": "Site", "fr": "Site"},
    "leave_address": {"en": "Full address", "fr": "Adresse complète"},
    "leave_continue": {"en": "Open this address", "fr": "Ouvrir cette adresse"},
    "leave_back": {"en": "Stay on signoff", "fr": "Rester sur signoff"},
    "leave_unopenable": {
        "en": "This address cannot be opened from here.",
        "fr": "Cette adresse ne peut pas être ouverte d'ici.",
    },
    "home": {"en": "Start", "fr": "Accueil"},
    "inbox": {"en": "Approvals", "fr": "Approbations"},
    "ask_assistant": {"en": "Ask the assistant", "fr": "Demander à l'assistant"},
    "no_resources": {"en": "Nothing to open here yet.", "fr": "Rien à ouvrir ici pour l'instant."},
    "no_sections": {
        "en": "No assistant is available right now. Try again in a moment.",
        "fr": "Aucun assistant n'est disponible pour l'instant. Réessayez dans un moment.",
    },
    "chat": {"en": "Conversation", "fr": "Conversation"},
    "you": {"en": "You", "fr": "Vous"},
    "assistant": {"en": "Assistant", "fr": "Assistant"},
    "app_message": {"en": "signoff (application)", "fr": "signoff (application)"},
    "your_answer": {"en": "Your answer", "fr": "Votre réponse"},
    "message": {"en": "Message", "fr": "Message"},
    "send": {"en": "Send", "fr": "Envoyer"},
    "thinking": {"en": "The assistant is answering…", "fr": "L'assistant répond…"},
    "approve": {"en": "Approve", "fr": "Approuver"},
    "decline": {"en": "Decline", "fr": "Refuser"},
    "withdraw": {"en": "Withdraw my proposal", "fr": "Retirer ma proposition"},
    "payload": {"en": "Details (you may edit them)", "fr": "Détails (modifiables)"},
    "payload_edited": {"en": "Details as edited:", "fr": "Détails modifiés :"},
    "reason": {"en": "Reason (optional)", "fr": "Motif (facultatif)"},
    "edit": {"en": "Edit", "fr": "Modifier"},
    "save_edit": {"en": "Prepare a new proposal", "fr": "Préparer une nouvelle proposition"},
    "submit": {"en": "Submit", "fr": "Envoyer"},
    "expires_in": {"en": "Expires in", "fr": "Expire dans"},
    "expired_now": {"en": "Expired", "fr": "Expirée"},
    "status": {"en": "Status", "fr": "Statut"},
    "audit": {"en": "Audit trail", "fr": "Journal d'audit"},
    "when": {"en": "When", "fr": "Quand"},
    "who": {"en": "Who", "fr": "Qui"},
    "action": {"en": "Action", "fr": "Action"},
    "detail": {"en": "Detail", "fr": "Détail"},
    "superseded_by": {
        "en": "Replaced by a newer card",
        "fr": "Remplacée par une carte plus récente",
    },
    "view_new": {"en": "see the new card", "fr": "voir la nouvelle carte"},
    "reconciliation": {"en": "Follow its reconciliation", "fr": "Suivre la vérification"},
    "no_pending": {"en": "Nothing waits for a decision.", "fr": "Rien n'attend de décision."},
    "approvals_needed": {
        "en": "Needs {required} approvals: {recorded} of {required}",
        "fr": "{required} approbations requises : {recorded} sur {required}",
    },
    "approved_by": {"en": "Approved by", "fr": "Approuvée par"},
    "waiting_for_another": {
        "en": "You approved it: waiting for another approver.",
        "fr": "Vous l'avez approuvée : en attente d'un autre approbateur.",
    },
    "proposer_may_not_approve": {
        "en": "You proposed it: another person must approve it.",
        "fr": "Vous l'avez proposée : une autre personne doit l'approuver.",
    },
    "role_not_counted": {
        "en": "The approval policy needs another role to approve this.",
        "fr": "La règle d'approbation demande un autre rôle pour approuver ceci.",
    },
    "no_rights": {
        "en": "You can see this card; only a manager can decide it.",
        "fr": "Vous voyez cette carte ; seul un gestionnaire peut en décider.",
    },
    "pause_point": {"en": "Question from the assistant", "fr": "Question de l'assistant"},
    "open_chat": {"en": "Open the conversation", "fr": "Ouvrir la conversation"},
    "required": {"en": "required", "fr": "obligatoire"},
    "error": {"en": "Something went wrong.", "fr": "Une erreur s'est produite."},
    "forbidden": {"en": "You may not do this.", "fr": "Vous ne pouvez pas faire cela."},
    "not_found": {"en": "Not found.", "fr": "Introuvable."},
    "reference": {"en": "Reference for support", "fr": "Référence pour l'assistance"},
}

#: what an API's problem ``code`` means to a person, and what they can do about it
PROBLEMS: dict[str, dict[Locale, str]] = {
    "not_found": {
        "en": "We could not find this. It may have been removed, or it belongs to another "
        "organization. Go back to the start page and open it from there.",
        "fr": "Introuvable. Cela a peut-être été supprimé, ou appartient à une autre "
        "organisation. Revenez à l'accueil et ouvrez-le depuis là.",
    },
    "forbidden": {
        "en": "You are not allowed to do this with your role. Ask a manager of your "
        "organization if it needs doing.",
        "fr": "Votre rôle ne vous permet pas de faire cela. Demandez à un gestionnaire de "
        "votre organisation si c'est nécessaire.",
    },
    "expired": {
        "en": "This has expired: it can no longer be decided. Ask the assistant again for a "
        "fresh proposal.",
        "fr": "Ceci a expiré : il n'est plus possible d'en décider. Redemandez à l'assistant "
        "une nouvelle proposition.",
    },
    "unauthenticated": {
        "en": "Your session has expired. Please sign in again.",
        "fr": "Votre session a expiré. Veuillez vous reconnecter.",
    },
    "unavailable": {
        "en": "The service is unavailable at the moment. Nothing was changed: try again in a "
        "moment.",
        "fr": "Le service est momentanément indisponible. Rien n'a été modifié : réessayez "
        "dans un moment.",
    },
    "busy": {
        "en": "The assistant is still answering. Wait for its answer, then try again.",
        "fr": "L'assistant répond encore. Attendez sa réponse, puis réessayez.",
    },
    "rate_limited": {
        "en": "Too many requests at once. Wait a moment and try again.",
        "fr": "Trop de demandes à la fois. Attendez un instant et réessayez.",
    },
    "unknown_section": {
        "en": "This assistant is not available: the assistant service does not serve this "
        "section. Go back to the start page and choose one of the assistants listed there.",
        "fr": "Cet assistant n'est pas disponible : le service des assistants ne couvre pas "
        "cette section. Revenez à l'accueil et choisissez l'un des assistants proposés.",
    },
    "error": {
        "en": "Something went wrong on our side. Nothing is known to have changed. Try again; "
        "if it happens again, give the reference below to your administrator.",
        "fr": "Une erreur s'est produite de notre côté. Rien n'a changé à notre connaissance. "
        "Réessayez ; si cela se reproduit, communiquez la référence ci-dessous à votre "
        "administrateur.",
    },
}

#: an API's problem ``code`` (or a bare HTTP status) → the ``PROBLEMS`` entry that explains it
PROBLEM_OF: dict[str, str] = {
    "not_found": "not_found",
    "resource_not_found": "not_found",
    "forbidden": "forbidden",
    "not_your_conversation": "forbidden",
    "csrf": "forbidden",
    "expired": "expired",
    "unauthenticated": "unauthenticated",
    "turn_in_progress": "busy",
    "rate_limited": "rate_limited",
    "unknown_section": "unknown_section",
    "proposals_unavailable": "unavailable",
    "unavailable": "unavailable",
    "401": "unauthenticated",
    "403": "forbidden",
    "404": "not_found",
    "429": "rate_limited",
    "502": "unavailable",
    "503": "unavailable",
    "504": "unavailable",
}

ROLES: dict[str, dict[Locale, str]] = {
    "admin": {"en": "administrator", "fr": "administrateur"},
    "manager": {"en": "manager", "fr": "gestionnaire"},
    "viewer": {"en": "viewer", "fr": "lecteur"},
}

#: the outcome line of a finished card: what was done, in words (``{title}`` is the card's)
OUTCOMES: dict[str, dict[Locale, str]] = {
    "succeeded": {
        "en": "Done: “{title}” was carried out as approved.",
        "fr": "C'est fait : « {title} » a été exécutée comme approuvée.",
    },
    #: a success whose stored result the operation's ``render_result`` put in words
    "succeeded_result": {"en": "Done: {result}", "fr": "C'est fait : {result}"},
    "needs_reconciliation": {
        "en": "Waiting for confirmation: signoff keeps checking with the provider whether "
        "“{title}” took effect, until the provider or an operator confirms it.",
        "fr": "En attente de confirmation : signoff continue de vérifier auprès du fournisseur "
        "si « {title} » a pris effet, jusqu'à ce que le fournisseur ou un opérateur le confirme.",
    },
    "revision_required": {
        "en": "Not carried out, nothing was changed: {detail}",
        "fr": "Non exécutée, rien n'a été modifié : {detail}",
    },
    "failed": {
        "en": "Failed and will not be retried. Quote {detail} to an operator.",
        "fr": "Échec, sans nouvelle tentative. Communiquez {detail} à un opérateur.",
    },
}

STATUS: dict[str, dict[Locale, str]] = {
    "pending": {"en": "pending", "fr": "en attente"},
    "executing": {"en": "executing", "fr": "en cours"},
    "succeeded": {"en": "succeeded", "fr": "réussie"},
    "failed": {"en": "failed", "fr": "échouée"},
    "declined": {"en": "declined", "fr": "refusée"},
    "withdrawn": {"en": "withdrawn", "fr": "retirée"},
    "expired": {"en": "expired", "fr": "expirée"},
    "superseded": {"en": "superseded", "fr": "remplacée"},
    "needs_reconciliation": {"en": "waiting for confirmation", "fr": "en attente de confirmation"},
    "revision_required": {"en": "revision required", "fr": "révision nécessaire"},
    "resolved": {"en": "resolved", "fr": "résolue"},
}

#: what a command's reply means to the person who sent it
NOTICES: dict[str, dict[Locale, str]] = {
    "claimed": {
        "en": "Approved: it is being carried out.",
        "fr": "Approuvée : exécution en cours.",
    },
    "approval_recorded": {
        "en": "Your approval is recorded: waiting for another approver.",
        "fr": "Votre approbation est enregistrée : en attente d'un autre approbateur.",
    },
    "declined": {"en": "Declined.", "fr": "Refusée."},
    "withdrawn": {"en": "Withdrawn.", "fr": "Retirée."},
    "revised": {
        "en": "A new proposal replaces the old one.",
        "fr": "Une nouvelle proposition remplace l'ancienne.",
    },
    "resolved": {"en": "Your answer was recorded.", "fr": "Votre réponse a été enregistrée."},
    "already_completed": {
        "en": "Already decided and finished: here is its outcome.",
        "fr": "Déjà décidée et terminée : voici son résultat.",
    },
    "not_approvable": {
        "en": "This can no longer be decided ({reason}).",
        "fr": "Il n'est plus possible d'en décider ({reason}).",
    },
    "forbidden": {"en": "You may not do this.", "fr": "Vous ne pouvez pas faire cela."},
    "not_found": {"en": "Not found.", "fr": "Introuvable."},
    "unauthenticated": {"en": "Please sign in again.", "fr": "Veuillez vous reconnecter."},
    "invalid": {"en": "Not valid: {reason}", "fr": "Invalide : {reason}"},
    "rate_limited": {"en": "Too many waiting proposals.", "fr": "Trop de propositions en attente."},
    #: ``rate_limited`` for the person's own pace (reason ``rate_limited``), not a quota
    "too_fast": {
        "en": "Too many decisions at once: wait a moment and try again.",
        "fr": "Trop de décisions à la fois : attendez un instant et réessayez.",
    },
    "unavailable": {
        "en": "No answer in time; nothing is known to have changed. Try again.",
        "fr": "Pas de réponse à temps ; rien n'a changé à notre connaissance. Réessayez.",
    },
}

_MONTHS_FR = (
    "janvier février mars avril mai juin juillet août septembre octobre novembre décembre"
).split()


def t(key: str, locale: Locale) -> str:
    return UI[key][locale]


def problem(code: str, locale: Locale) -> str:
    """What a problem ``code`` (or an HTTP status as text) means, and what to do about it."""
    return PROBLEMS[PROBLEM_OF.get(code, "error")][locale]


def role(value: str, locale: Locale) -> str:
    return ROLES.get(value, {}).get(locale, value)


def outcome(kind: str, locale: Locale, **params: str) -> str:
    template = OUTCOMES.get(kind)
    return status(kind, locale) if template is None else template[locale].format(**params)


def status(value: str, locale: Locale) -> str:
    return STATUS.get(value, {}).get(locale, value)


def notice(result: str, locale: Locale, reason: str = "") -> str:
    key = "too_fast" if (result, reason) == ("rate_limited", "rate_limited") else result
    template = NOTICES.get(key, NOTICES["invalid"])[locale]
    return template.format(reason=status(reason, locale) if reason else "—")


def money(cents: int, currency: str, locale: Locale) -> str:
    """``1,234.50 CAD`` / ``1 234,50 CAD``: integers only, never floats."""
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    if locale == "fr":
        return f"{sign}{whole:,}".replace(",", "\u202f") + f",{part:02d} {currency}"
    return f"{sign}{whole:,}.{part:02d} {currency}"


def when(moment: datetime | str, locale: Locale) -> str:
    at = datetime.fromisoformat(moment) if isinstance(moment, str) else moment
    at = at.astimezone(UTC)
    if locale == "fr":
        return f"{at.day} {_MONTHS_FR[at.month - 1]} {at.year} à {at:%H:%M} UTC"
    return f"{at:%b} {at.day}, {at.year}, {at:%H:%M} UTC"
