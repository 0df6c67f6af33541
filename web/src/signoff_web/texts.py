"""Every word the web itself shows, in English and French; money and dates per locale."""

from __future__ import annotations

from datetime import UTC, datetime

from signoff_contracts.operations import Locale

__all__ = ["UI", "Locale", "money", "notice", "status", "t", "when"]

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
    "orders": {"en": "Orders", "fr": "Commandes"},
    "broadcasts": {"en": "Broadcast forms", "fr": "Formulaires d'envoi"},
    "participant": {"en": "Participant", "fr": "Participant"},
    "total": {"en": "Total", "fr": "Total"},
    "order_assistant": {"en": "Ask the order assistant", "fr": "Demander à l'assistant commandes"},
    "email_assistant": {"en": "Ask the email assistant", "fr": "Demander à l'assistant courriel"},
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
}

STATUS: dict[str, dict[Locale, str]] = {
    "pending": {"en": "pending", "fr": "en attente"},
    "executing": {"en": "executing", "fr": "en cours"},
    "succeeded": {"en": "succeeded", "fr": "réussie"},
    "failed": {"en": "failed", "fr": "échouée"},
    "declined": {"en": "declined", "fr": "refusée"},
    "expired": {"en": "expired", "fr": "expirée"},
    "superseded": {"en": "superseded", "fr": "remplacée"},
    "needs_reconciliation": {"en": "needs reconciliation", "fr": "à vérifier"},
    "revision_required": {"en": "revision required", "fr": "révision nécessaire"},
    "resolved": {"en": "resolved", "fr": "résolue"},
}

#: what a command's reply means to the person who sent it
NOTICES: dict[str, dict[Locale, str]] = {
    "claimed": {
        "en": "Approved: it is being carried out.",
        "fr": "Approuvée : exécution en cours.",
    },
    "declined": {"en": "Declined.", "fr": "Refusée."},
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
