"""The operation SDK: one capability, one class, every part in one module.

An operation is what an assistant may *propose*. Its module declares the model-facing
``Request``, the frozen ``Arguments`` that will run, the frozen ``Preview`` a person approves,
the typed ``Result``, and the code of each lifecycle stage:

========================  ==========================  ========================================
part                      used by                     contract
========================  ==========================  ========================================
``resolve``               proposals                   request + server scope → arguments +
                                                      preview, or ``Rejected(code)``
``authorize``             proposals (at approval)     may this member do the underlying thing
``may_propose``           proposals (at proposing)    may this member ask for it (default:
                                                      ``authorize``)
``revalidate``            executor (same tx)          do the previewed facts still hold; lock
``execute``               executor (same tx)          local effect, committed with the outcome
``begin_attempt`` …       executor                    external effect, the attempt protocol
``reconcile``             reconciler                  ask the provider what became of it
``render_preview``        agent, web                  the fixed human view, per locale
``render_result``         agent, web                  what was done, per locale, from the
                                                      stored ``Succeeded.result``
``policy_facts``          proposals (policies)        the ``Preview`` fields an approval
                                                      policy may test (``amount_cents``)
========================  ==========================  ========================================

A subclass missing a part fails in ``check_operation`` when operations are loaded (start-up),
never at approval time. Database connections and provider clients are passed in: this module
does no I/O and knows no driver, so ``conn`` is whatever the running service hands over
(SQLAlchemy's ``AsyncConnection`` in signoff's services).

The module is longer than most (over 300 lines) on purpose: it is the whole SDK an adopter
implements against, and each part's contract is written beside its signature.
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.reasons import ParamValue, Reason

RequestT = TypeVar("RequestT", bound=BaseModel)
ArgumentsT = TypeVar("ArgumentsT", bound=BaseModel)
PreviewT = TypeVar("PreviewT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)
ProviderT = TypeVar("ProviderT")

Locale = Literal["en", "fr"]
#: the value of a policy fact (``Operation.policy_facts``)
FactValue = bool | int | float | str
LOCALES: tuple[Locale, ...] = ("en", "fr")
_KIND = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


class Scope(BaseModel):
    """Where a proposal acts. Always built by the server, never taken from the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    organization_id: str
    section: str
    resource_id: str


class Actor(BaseModel):
    """A person acting, with the role the directory gives them in ``organization_id`` now."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    organization_id: str
    role: str


class Membership(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    organization_id: str
    role: str
    display_name: str = ""
    locale: Locale = "en"


class Directory(Protocol):
    """Who belongs to which organization with which role (entry point ``signoff.directory``)."""

    async def membership(self, conn: Any, user_id: str, organization_id: str) -> Membership | None:
        """The person's current membership, or ``None`` if they are not (or no longer) in it."""
        ...

    async def memberships(self, conn: Any, user_id: str) -> list[Membership]:
        """Every organization the person belongs to (the CLI issues tokens from this)."""
        ...


@runtime_checkable
class SignIn(Protocol):
    """The part of a directory that signs people in with a password (the web asks it).

    A directory whose people sign in elsewhere (an OIDC provider) need not have it; the web
    refuses to start without it.
    """

    async def authenticate(self, conn: Any, email: str, password: str) -> Membership | None:
        """The person's membership, or ``None`` — the same ``None`` for an unknown email and a
        wrong password. ``conn`` is in a transaction, so an old hash may be upgraded."""
        ...


class Rejected(Exception):
    """``resolve`` refuses the request: a reason code the model or client can act on."""

    def __init__(self, code: str, **params: ParamValue) -> None:
        super().__init__(code)
        self.reason = Reason(code=code, params=params)


class OperationDefinitionError(TypeError):
    """An operation class is missing a part or declares one wrongly (raised at load time)."""


@dataclass(frozen=True, slots=True)
class Resolved(Generic[ArgumentsT, PreviewT]):
    arguments: ArgumentsT
    preview: PreviewT


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """Facts of the approved contract that execution may use (ids are for idempotency keys)."""

    proposal_id: str
    contract_id: str
    approved_by: str
    approved_at: datetime


class PreviewLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    value: str


class RenderedPreview(BaseModel):
    """The fixed human view of a preview in one locale: a title and labelled lines."""

    model_config = ConfigDict(frozen=True)

    title: str
    lines: list[PreviewLine] = Field(default_factory=list)


class Operation(ABC, Generic[RequestT, ArgumentsT, PreviewT, ResultT]):
    """Base of every operation contract. See the module docstring for the parts."""

    kind: ClassVar[str]
    version: ClassVar[int]
    section: ClassVar[str]
    resource: ClassVar[str]
    summary: ClassVar[str]
    effect: ClassVar[Literal["local", "external"]] = "local"
    ttl: ClassVar[timedelta] = timedelta(hours=24)
    Request: ClassVar[type[BaseModel]]
    Arguments: ClassVar[type[BaseModel]]
    Preview: ClassVar[type[BaseModel]]
    Result: ClassVar[type[BaseModel]]
    #: per-locale message templates for this operation's reason codes (``str.format`` style)
    reasons: ClassVar[dict[str, dict[Locale, str]]] = {}
    #: per-locale name and description in the operations catalogue (``GET /v1/operations``)
    #: and the tools generated from it (MCP, agent frameworks); default ``kind`` / ``summary``
    title: ClassVar[dict[Locale, str]] = {}
    description: ClassVar[dict[Locale, str]] = {}
    #: the ``Preview`` fields an approval policy may test ("refunds over 100.00 need two
    #: managers"): each a typed field of ``Preview`` (int, float, bool or str). A policy naming
    #: any other fact is refused when it is saved; the facts of a stored proposal come from its
    #: frozen preview, so what a policy tests is exactly what the approver is shown.
    policy_facts: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    async def resolve(
        self, request: RequestT, scope: Scope, conn: Any
    ) -> Resolved[ArgumentsT, PreviewT]:
        """Validate against server-owned state and freeze arguments and preview, or raise
        ``Rejected``."""

    @abstractmethod
    def authorize(self, actor: Actor, scope: Scope) -> bool:
        """May ``actor`` (whose role the directory just confirmed) perform this operation?"""

    def may_propose(self, actor: Actor, scope: Scope) -> bool:
        """May ``actor`` ask for this operation (a proposal someone must still approve)?

        By default, exactly those who may perform it (``authorize``): a proposal fills the
        organization's approval queue, so a viewer may not propose. An operation where one role
        asks and another decides (front-desk staff propose refunds, managers approve) widens it
        here; it should never be narrower than what a person can see."""
        return self.authorize(actor, scope)

    @abstractmethod
    async def revalidate(self, arguments: ArgumentsT, scope: Scope, conn: Any) -> Reason | None:
        """Lock the rows the preview depends on; return why it no longer holds, or ``None``."""

    @abstractmethod
    def render_preview(self, preview: PreviewT, locale: Locale) -> RenderedPreview:
        """The operation's own fixed template for ``preview``: title, labels and structure come
        from the operation, never the model; content fields (a drafted subject or body) are data
        shown verbatim, as the person approves them."""

    @abstractmethod
    def render_result(self, result: ResultT, locale: Locale) -> str:
        """What was done, in one sentence of the person's words, from the ``Result`` the
        operation returned (``execute`` / ``record`` / ``reconcile``) — never recomputed.
        The card, the hand-back message and the next turn's context show it; a stored result
        that no longer parses falls back to the lifecycle's generic sentence there."""

    def title_in(self, locale: Locale) -> str:
        return self.title.get(locale) or self.kind

    def description_in(self, locale: Locale) -> str:
        return self.description.get(locale) or self.summary

    def parse_result(self, data: Any) -> ResultT:
        return self.Result.model_validate(data)  # type: ignore[return-value]

    def parse_request(self, data: Any) -> RequestT:
        refuse_nul(self.Request, data)
        return self.Request.model_validate(data)  # type: ignore[return-value]

    def parse_arguments(self, data: Any) -> ArgumentsT:
        return self.Arguments.model_validate(data)  # type: ignore[return-value]

    def parse_preview(self, data: Any) -> PreviewT:
        return self.Preview.model_validate(data)  # type: ignore[return-value]

    @classmethod
    def fact_types(cls) -> dict[str, type]:
        """Each declared policy fact and its type (``check_operation`` has vouched for both)."""
        fields = cls.Preview.model_fields
        return {name: _fact_type(fields[name].annotation) or str for name in cls.policy_facts}

    def facts(self, preview: Any) -> dict[str, FactValue]:
        """The declared policy facts of a stored preview (a dict), parsed as the operation's
        ``Preview``: a policy tests typed values, never raw JSON."""
        parsed = self.parse_preview(preview)
        return {name: getattr(parsed, name) for name in self.policy_facts}


class LocalOperation(Operation[RequestT, ArgumentsT, PreviewT, ResultT]):
    """An operation whose whole effect is in the domain database: it commits with its outcome."""

    effect: ClassVar[Literal["local", "external"]] = "local"

    @abstractmethod
    async def execute(
        self, arguments: ArgumentsT, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> ResultT:
        """Apply the change inside the executor's transaction (after ``revalidate``)."""


@dataclass(frozen=True, slots=True)
class AttemptRef:
    """A recorded attempt of an external effect, committed before the provider is called.

    ``lease_s``: how long after the transaction that recorded it began the caller may still
    *start* the provider call. The reconciler may conclude "never applied" once the lease (and
    the client timeout) has passed, so a call started later could land after that verdict: the
    executor does not make it (``signoff_runtime.execution``) and leaves the attempt to the
    reconciler. ``None``: the operation grants no lease (its reconciler never concludes "never
    applied" by the clock). Not part of the attempt's identity.
    """

    attempt_id: str
    idempotency_key: str
    lease_s: float | None = field(default=None, compare=False)


class EffectUncertain(Exception):
    """The provider may or may not have applied the effect (lost response, timeout)."""


@dataclass(frozen=True, slots=True)
class StrandedAttempt:
    """An attempt left unconcluded past its lease that no one may have asked about yet (its
    executor died between recording the attempt and recording the answer). ``contract_id`` is
    ``None`` when the domain did not keep it; the reconciler then withholds the outcome until a
    ``ReconciliationRequired`` names the contract."""

    attempt_id: str
    proposal_id: str
    organization_id: str
    contract_id: str | None = None


class ExternalOperation(
    Operation[RequestT, ArgumentsT, PreviewT, ResultT],
    Generic[RequestT, ArgumentsT, PreviewT, ResultT, ProviderT],
):
    """An operation with an effect outside the database, run by the attempt protocol:

    1. ``begin_attempt`` records the attempt (key derived from the proposal id) in the same
       transaction as ``revalidate``; the executor commits before any call;
    2. ``perform`` calls the provider once; it raises ``EffectUncertain`` when the answer is lost;
    3. ``record`` stores the provider's answer and returns the outcome, in a second transaction;
       after ``EffectUncertain``, ``mark_unknown`` does, and the reconciler takes over;
    4. ``reconcile`` asks the provider with the same key and returns the authoritative outcome,
       or ``None`` while it cannot yet conclude (lease and client timeout not yet passed).
    """

    effect: ClassVar[Literal["local", "external"]] = "external"

    @abstractmethod
    def open_provider(self) -> AbstractAsyncContextManager[ProviderT]:
        """A provider client configured from the domain's own settings."""

    @abstractmethod
    async def begin_attempt(
        self, arguments: ArgumentsT, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> AttemptRef: ...

    @abstractmethod
    async def perform(self, attempt: AttemptRef, arguments: ArgumentsT, provider: ProviderT) -> Any:
        """Call the provider once with ``attempt.idempotency_key``; return its answer."""

    @abstractmethod
    async def record(self, attempt: AttemptRef, answer: Any, conn: Any) -> OperationOutcome: ...

    @abstractmethod
    async def mark_unknown(self, attempt: AttemptRef, conn: Any) -> None: ...

    @abstractmethod
    async def reconcile(
        self, attempt_id: str, conn: Any, provider: ProviderT
    ) -> OperationOutcome | None: ...

    async def stranded_attempts(self, conn: Any, older_than_s: float) -> list[StrandedAttempt]:
        """Optional: attempts still pending or unknown ``older_than_s`` past their lease, so the
        reconciler's scan finds those whose ``ReconciliationRequired`` never came. The default
        finds none (an operation without the hook relies on that message alone)."""
        return []

    async def settle_by_operator(
        self, attempt_id: str, conn: Any, *, applied: bool
    ) -> OperationOutcome | None:
        """Optional: an operator's verdict on an attempt the provider's API cannot settle
        (``applied``: the provider's dashboard shows the effect). Record it in the domain and
        return the outcome to report; the default records nothing and returns ``None`` (the
        reconciler then reports a generic ``Succeeded({})`` or ``TerminalFailure``)."""
        return None


AnyOperation = Operation[Any, Any, Any, Any]
_FACT_TYPES: tuple[type, ...] = (bool, int, float, str)
_MODEL_PARTS = ("Request", "Arguments", "Preview", "Result")
_SCALARS = ("kind", "version", "section", "resource", "summary")


def check_operation(cls: type[Any]) -> None:
    """Raise ``OperationDefinitionError`` naming every missing or malformed part of ``cls``."""
    problems: list[str] = []
    if not (isinstance(cls, type) and issubclass(cls, (LocalOperation, ExternalOperation))):
        raise OperationDefinitionError(
            f"{cls!r} is not a LocalOperation or ExternalOperation subclass"
        )
    for name in _SCALARS:
        if not hasattr(cls, name):
            problems.append(f"missing `{name}`")
    if hasattr(cls, "kind") and not _KIND.match(str(cls.kind)):
        problems.append(f"`kind` {cls.kind!r} must look like `resource.verb_phrase`")
    if hasattr(cls, "version") and not (isinstance(cls.version, int) and cls.version >= 1):
        problems.append("`version` must be an int >= 1")
    problems += _check_models(cls)
    problems += _check_facts(cls)
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        problems.append("unimplemented: " + ", ".join(missing))
    for name in (
        "resolve",
        "revalidate",
        "execute",
        "begin_attempt",
        "perform",
        "record",
        "mark_unknown",
        "reconcile",
        "stranded_attempts",
        "settle_by_operator",
    ):
        method = getattr(cls, name, None)
        if method is not None and not inspect.iscoroutinefunction(method):
            problems.append(f"`{name}` must be `async def`")
    if problems:
        raise OperationDefinitionError(f"operation {cls.__qualname__}: " + "; ".join(problems))


def _check_models(cls: type[Any]) -> list[str]:
    problems = []
    for name in _MODEL_PARTS:
        model = getattr(cls, name, None)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            problems.append(f"missing `{name}` (a pydantic model)")
            continue
        config = model.model_config
        if not config.get("frozen"):
            problems.append(f"`{name}` must be frozen")
        if name in ("Request", "Arguments") and config.get("extra") != "forbid":
            problems.append(f"`{name}` must forbid unknown fields (extra='forbid')")
    return problems


def _fact_type(annotation: Any) -> type | None:
    return annotation if annotation in _FACT_TYPES else None


def _check_facts(cls: type[Any]) -> list[str]:
    preview = getattr(cls, "Preview", None)
    facts = getattr(cls, "policy_facts", ())
    if not isinstance(facts, tuple) or not all(isinstance(f, str) for f in facts):
        return ["`policy_facts` must be a tuple of Preview field names"]
    if not (isinstance(preview, type) and issubclass(preview, BaseModel)):
        return []
    fields = preview.model_fields
    return [
        f"policy fact `{name}` must be a Preview field of type bool, int, float or str"
        for name in facts
        if name not in fields or _fact_type(fields[name].annotation) is None
    ]


def _nul_at(data: Any, loc: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    if isinstance(data, str):
        return loc if "\x00" in data else None
    if isinstance(data, dict):
        items: Any = data.items()
    elif isinstance(data, list | tuple):
        items = enumerate(data)
    else:
        return None
    for key, value in items:
        if isinstance(key, str) and "\x00" in key:
            return (*loc, key)
        found = _nul_at(value, (*loc, key))
        if found is not None:
            return found
    return None


def refuse_nul(model: type[BaseModel], data: Any) -> None:
    """Refuse (as a ``ValidationError``) input holding a NUL character anywhere: PostgreSQL's
    text and jsonb cannot store one, so it would fail deep inside ``resolve`` instead of here."""
    loc = _nul_at(data)
    if loc is not None:
        raise ValidationError.from_exception_data(
            model.__name__,
            [
                InitErrorDetails(
                    type=PydanticCustomError("nul_character", "Text may not hold NUL characters."),
                    loc=loc,
                    input="",
                )
            ],
        )
