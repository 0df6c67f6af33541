"""What a ``data_entry`` pause point's form may never ask for: secrets and payment credentials.

The form is written by the model, and the model can be steered by whatever text it reads. A form
asking "your card number" or "your password" would put a person's secret into a conversation,
a pause point's resolution and the model's next context, all stored and none of them built to
hold one. So the agent (before sending) and the proposals service (before storing) both refuse a
form whose field asks for one, by this one rule:

- a field whose **name or title** names a secret: ``password``/``passwd``/``pwd``/``passphrase``/
  ``passcode``, ``pin``, ``cvv``/``cvc``/``csc`` (security code), a card number (``card_number``,
  ``cardNumber``, ``credit card``, ``ccn``, ``pan``), ``iban``, ``ssn``/social security number,
  ``secret``, ``token``, ``api_key``, ``private key``, ``otp``/one-time code — matched as words,
  whatever the case or separator (``cardNumber``, ``card-no``, ``Card number``), so ``pinned``,
  ``spin``, ``company`` or ``secretary`` pass;
- a field declaring ``format: password`` or ``writeOnly: true`` (how JSON Schema marks a secret).

Pure and dependency-free, so each service applies the same list.
"""

from __future__ import annotations

import re
from typing import Any

#: words that name a secret on their own
SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "passcode",
        "pin",
        "cvv",
        "cvv2",
        "cvc",
        "cvc2",
        "csc",
        "pan",
        "ccn",
        "iban",
        "ssn",
        "secret",
        "token",
        "apikey",
        "otp",
        "totp",
    }
)
#: words that name a secret together (adjacent, in this order)
SECRET_PHRASES = (
    ("card", "number"),
    ("card", "no"),
    ("card", "num"),
    ("cc", "number"),
    ("cc", "num"),
    ("credit", "card"),
    ("debit", "card"),
    ("security", "code"),
    ("verification", "code"),
    ("api", "key"),
    ("access", "key"),
    ("private", "key"),
    ("secret", "key"),
    ("access", "token"),
    ("social", "security"),
    ("one", "time", "code"),
    ("one", "time", "password"),
)
#: the same, written as one word (``cardnumber``, ``creditcard``, ``privatekey``)
_JOINED = frozenset("".join(phrase) for phrase in SECRET_PHRASES)
#: found even inside a longer word (``newpassword``, ``myapikey``); long enough that no ordinary
#: word holds one by chance
_INSIDE = frozenset(
    {
        "password",
        "passcode",
        "passphrase",
        "cardnumber",
        "creditcard",
        "debitcard",
        "apikey",
        "privatekey",
        "secretkey",
        "accesstoken",
        "securitycode",
        "socialsecurity",
        "cvv",
        "cvc",
    }
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """``cardNumber`` / ``card-no`` / ``Card number`` → ``["card", "number"]``…"""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


def names_a_secret(text: str) -> bool:
    """Whether a field's name or label asks for a secret."""
    found = words(text)
    for word in found:
        if word in SECRET_WORDS or word.removesuffix("s") in SECRET_WORDS or word in _JOINED:
            return True
        if any(inside in word for inside in _INSIDE):
            return True
    for phrase in SECRET_PHRASES:
        n = len(phrase)
        if any(tuple(found[i : i + n]) == phrase for i in range(len(found) - n + 1)):
            return True
    return False


def secret_field(name: str, spec: Any) -> bool:
    """Whether the form field ``name`` (its JSON-schema ``spec``) asks for a secret."""
    if names_a_secret(name):
        return True
    if not isinstance(spec, dict):
        return False
    title = spec.get("title")
    if isinstance(title, str) and names_a_secret(title):
        return True
    return spec.get("format") == "password" or spec.get("writeOnly") is True


def secret_fields(schema: Any) -> list[str]:
    """The fields of a form schema that ask for a secret, in declaration order."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    return [str(name) for name, spec in properties.items() if secret_field(str(name), spec)]
