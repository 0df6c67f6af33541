"""Errors as typed exceptions, each carrying the problem document's ``code``."""

from __future__ import annotations

from typing import Any


class SignoffError(Exception):
    """A problem document answered by a signoff service (or no answer at all)."""

    def __init__(self, status: int, code: str, title: str, problem: dict[str, Any]) -> None:
        super().__init__(f"{status} {code}: {title}")
        self.status = status
        self.code = code
        self.title = title
        #: the whole problem document (``reason``, ``params``, ``errors``, ``proposal``…)
        self.problem = problem


class Unauthenticated(SignoffError):
    """401: no valid token for this service."""


class Forbidden(SignoffError):
    """403: the person may not do this (their role, or the policy)."""


class NotFound(SignoffError):
    """404: no such proposal or operation in the caller's organization."""


class Conflict(SignoffError):
    """409: the proposal cannot be decided now (``not_approvable``, ``not_resolvable``…)."""


class Invalid(SignoffError):
    """422: the request does not fit, or the operation refused it (the reason's ``code``)."""


class RateLimited(SignoffError):
    """429: too many requests; ``retry_after_s`` says when to try again."""

    @property
    def retry_after_s(self) -> float | None:
        params = self.problem.get("params") or {}
        value = params.get("retry_after_s", self.problem.get("retry_after_s"))
        return float(value) if value is not None else None


class Unavailable(SignoffError):
    """503 (after the client's retries), or the service could not be reached."""


class WaitTimeout(SignoffError):
    """``wait`` ran out of time before the proposal reached a terminal status."""


_BY_STATUS: dict[int, type[SignoffError]] = {
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
    429: RateLimited,
    503: Unavailable,
}


def from_problem(status: int, problem: dict[str, Any]) -> SignoffError:
    kind = _BY_STATUS.get(status, SignoffError)
    code = str(problem.get("code") or f"http_{status}")
    return kind(status, code, str(problem.get("title") or code), problem)
