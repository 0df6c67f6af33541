"""The conformance kit: the promises every signoff operation keeps, as tests.

Subclass ``OperationConformance`` in a test module, name the operation class and give a
``case`` fixture that builds a ``ConformanceCase`` in the real database; the inherited tests
check scope, staleness, JSON round trips, idempotent execution and (for external effects) the
attempt protocol, that each reason code has a text in every locale, that any request resolves
inside the scope or is refused, and that the operation is registered under its entry point. The
``run_*`` drivers are the execute paths the checks use (the executor's own protocol,
``signoff_runtime.execution``) — call them from an operation's own tests too; ``actors`` finds
the case's manager and viewer through the domain's directory.
"""

from signoff_conformance.actors import actors
from signoff_conformance.case import CaseError, ConformanceCase, StaleFact
from signoff_conformance.driver import (
    ProviderSpy,
    Run,
    begin,
    is_unique_violation,
    new_context,
    reconcile,
    resolve_request,
    run_execution,
    run_external,
    run_local,
    stored,
)
from signoff_conformance.suite import OperationConformance

__all__ = [
    "CaseError",
    "ConformanceCase",
    "OperationConformance",
    "ProviderSpy",
    "Run",
    "StaleFact",
    "actors",
    "begin",
    "is_unique_violation",
    "new_context",
    "reconcile",
    "resolve_request",
    "run_execution",
    "run_external",
    "run_local",
    "stored",
]
