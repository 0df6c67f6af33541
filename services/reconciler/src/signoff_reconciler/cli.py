"""Operator commands: ``signoff reconcile …`` and ``signoff dlq …``.

``signoff reconcile PROPOSAL_ID`` makes the proposal's reconciliation check due now and waits
(``--wait``) for a running reconciler to check it, then prints the check. With ``--resolve
succeeded|failed --note TEXT`` it resolves the check by hand, audited with the operator's name
(``--operator``, default the login name) and the note — once. ``signoff dlq list`` shows archived
dead letters not yet replayed (``--queue``, ``--all``), ``signoff dlq show ID`` one of them in full
(bearer tokens redacted, as in the archive); ``signoff dlq replay ID`` re-publishes one to its
queue, once, recording who did it — with the operator's own broker user (``SIGNOFF_AMQP__URL``
naming the ``cli`` role's user in production), which vouches for the letter's original sender.
Settings come from the environment like the service's (``SIGNOFF_DB__URL``, ``SIGNOFF_AMQP__*``).
Exit status: 0 done, 1 refused or timed out, 2 the database or broker could not be reached.
"""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, TypeVar

import typer
from signoff_runtime.db import create_engine
from signoff_runtime.registry import load_operations
from signoff_runtime.settings import load as load_settings
from signoff_runtime.topology import Topology
from sqlalchemy.exc import DBAPIError

from signoff_reconciler import operators
from signoff_reconciler.dead_letters import replay as replaying
from signoff_reconciler.dead_letters import repository as archived
from signoff_reconciler.dead_letters.replay import ReplayRefused
from signoff_reconciler.dead_letters.repository import DeadLetter
from signoff_reconciler.operators import OperatorRefused, Verdict
from signoff_reconciler.redaction import redact, redact_body, redact_text
from signoff_reconciler.repository import CheckState
from signoff_reconciler.settings import ReconcilerSettings

T = TypeVar("T")

reconcile_app = typer.Typer(add_completion=False)
dlq_app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Archived dead letters: list and replay."
)


@reconcile_app.callback(
    invoke_without_command=True, context_settings={"allow_interspersed_args": True}
)
def reconcile(
    proposal_id: str = typer.Argument(..., help="The proposal id (prp_…)."),
    resolve: str | None = typer.Option(
        None, "--resolve", help="succeeded or failed: resolve by hand (needs --note)."
    ),
    note: str | None = typer.Option(None, "--note", help="Why (what the dashboard shows)."),
    operator: str | None = typer.Option(None, "--operator", help="Who; default: login name."),
    wait: float | None = typer.Option(None, "--wait", help="Seconds to wait for the check."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Check a proposal's uncertain attempt now, or resolve it by hand (audited)."""
    settings = load_settings(ReconcilerSettings, "reconcile")
    if resolve is None:
        wait_s = wait if wait is not None else settings.reconciler.check_now_wait_s
        found = _run(
            settings,
            lambda engine: operators.check_now(engine, proposal_id, wait_s=wait_s),
        )
        _print_checks(found, as_json)
        return
    if resolve not in ("succeeded", "failed"):
        raise typer.BadParameter("must be succeeded or failed", param_hint="--resolve")
    if not note or not note.strip():
        raise typer.BadParameter("a manual resolution needs a note", param_hint="--note")
    verdict: Verdict = "succeeded" if resolve == "succeeded" else "failed"
    who = operator or getpass.getuser()
    topology = Topology(settings.amqp.prefix, settings.amqp.delivery_limit)
    operations = load_operations()
    state, outcome = _run(
        settings,
        lambda engine: operators.resolve(
            engine,
            topology,
            operations,
            proposal_id,
            verdict=verdict,
            operator=who,
            note=note.strip(),
        ),
    )
    if outcome.type != verdict:
        typer.echo(f"note: the domain had concluded this attempt already: {outcome.type}", err=True)
    _print_checks([state], as_json)


@dlq_app.command("list")
def list_letters(
    queue: str | None = typer.Option(None, "--queue", help="e.g. executor.contracts"),
    show_all: bool = typer.Option(False, "--all", help="Include replayed letters."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Archived dead letters, oldest first (not yet replayed, unless --all)."""
    letters = _run(
        load_settings(ReconcilerSettings, "dlq list"),
        lambda engine: archived.listing(engine, queue=queue, replayed=show_all, limit=limit),
    )
    if as_json:
        typer.echo(json.dumps([_letter_json(letter) for letter in letters], indent=2))
        return
    for letter in letters:
        replayed = f"  replayed by {letter.replayed_by}" if letter.replayed_by else ""
        typer.echo(
            f"{letter.id:>6}  {letter.dead_at.isoformat()}  {letter.queue:<26} "
            f"{letter.reason:<20} deliveries={letter.deliveries or '?'}  "
            f"{letter.message_type or '-'}  {letter.message_id or '-'}{replayed}"
        )
        if letter.detail:
            typer.echo(f"        {redact_text(letter.detail)}")


@dlq_app.command("show")
def show(
    letter_id: int = typer.Argument(..., help="The dead letter's id (from dlq list)."),
) -> None:
    """One archived dead letter in full, as JSON (bearer tokens redacted)."""
    letter = _run(
        load_settings(ReconcilerSettings, "dlq show"),
        lambda engine: archived.one(engine, letter_id),
    )
    if letter is None:
        typer.echo(f"not_found: no dead letter {letter_id}", err=True)
        raise typer.Exit(1)
    typer.echo(json.dumps(_letter_json(letter), indent=2))


@dlq_app.command("replay")
def replay(
    letter_id: int = typer.Argument(..., help="The dead letter's id (from dlq list)."),
    operator: str | None = typer.Option(None, "--operator", help="Who; default: login name."),
    note: str | None = typer.Option(None, "--note", help="What was fixed."),
) -> None:
    """Re-publish one dead letter to its queue (once; audited)."""
    settings = load_settings(ReconcilerSettings, "dlq replay")
    topology = Topology(settings.amqp.prefix, settings.amqp.delivery_limit)
    letter = _run(
        settings,
        lambda engine: replaying.replay(
            engine,
            settings.amqp.url,
            topology,
            letter_id,
            operator=operator or getpass.getuser(),
            note=note,
            timeout_s=settings.amqp.publish_timeout_s,
        ),
    )
    typer.echo(f"replayed {letter.id} to {letter.queue} ({letter.message_id or 'no message id'})")


def _run(settings: ReconcilerSettings, work: Callable[[Any], Awaitable[T]]) -> T:
    async def main() -> T:
        engine = create_engine(settings.db, application_name="signoff-cli")
        try:
            return await work(engine)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except (OperatorRefused, ReplayRefused) as refused:
        typer.echo(f"{refused.code}: {refused.detail}", err=True)
        raise typer.Exit(1) from None
    except (DBAPIError, OSError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        typer.echo(f"cannot reach the database or broker: {reason}", err=True)
        raise typer.Exit(2) from None


def _print_checks(found: list[CheckState], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([asdict(c) for c in found], indent=2, default=str))
        return
    for c in found:
        by = f" by {c.operator} ({c.note})" if c.operator else ""
        typer.echo(
            f"{c.proposal_id}  attempt {c.attempt_id}  {c.status}{by}  checks={c.checks}  "
            f"found_by={c.found_by}  age={int(c.age_s)}s"
        )
        if c.last_result:
            typer.echo(f"  last check {c.last_checked_at}: {json.dumps(c.last_result)}")
        if c.escalated_at is not None and c.status == "open":
            typer.echo(
                f"  escalated {c.escalated_at.isoformat()}: no answer yet; resolve it with "
                "--resolve succeeded|failed --note … once you know"
            )
        if c.status == "open":
            typer.echo(f"  next check {c.next_check_at.isoformat()}")
        if c.outcome:
            typer.echo(f"  outcome {json.dumps(c.outcome)}")


def _letter_json(letter: DeadLetter) -> dict[str, Any]:
    """Redacted again: letters archived before redaction existed may still hold a token."""
    data = asdict(letter)
    data["body"] = redact_body(letter.body).decode("utf-8", errors="replace")
    data["headers"] = redact(letter.headers)
    data["detail"] = None if letter.detail is None else redact_text(letter.detail)
    return json.loads(json.dumps(data, default=str))  # type: ignore[no-any-return]
