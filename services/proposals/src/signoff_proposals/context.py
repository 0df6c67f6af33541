"""What every handler of the service needs, built once at start-up and passed down.

The domain's parts — its operations and its directory — come from entry points in production.
In-process tests hand them to ``create_app``; process tests name a factory in
``SIGNOFF_PROPOSALS__TEST_PLUGIN`` (honoured only with ``SIGNOFF_ENV=test``), so the service can
be tested before, and independently of, any real domain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module

from signoff_contracts.operations import Directory
from signoff_runtime.limits import TokenBuckets
from signoff_runtime.registry import Operations, load_directory, load_operations
from signoff_runtime.topology import Topology
from signoff_runtime.unsafe import DirectPublisher
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_proposals.settings import ProposalsSettings


@dataclass(frozen=True, slots=True)
class Context:
    settings: ProposalsSettings
    engine: AsyncEngine
    topology: Topology
    operations: Operations
    directory: Directory
    #: ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX`` (tests only): messages bypass the outbox
    direct: DirectPublisher | None = None
    #: each person's approval commands over AMQP (``commands``), at the rate HTTP allows them
    #: (``SIGNOFF_LIMITS__APPROVALS_PER_MINUTE``): per process, like the HTTP limit
    command_rate: TokenBuckets = field(init=False)
    #: each person's proposal requests (``SIGNOFF_LIMITS__PROPOSALS_PER_MINUTE``), per process
    propose_rate: TokenBuckets = field(init=False)

    def __post_init__(self) -> None:
        limits = self.settings.limits
        object.__setattr__(self, "command_rate", TokenBuckets(limits.approvals_per_minute))
        object.__setattr__(self, "propose_rate", TokenBuckets(limits.proposals_per_minute))


def load_domain(
    settings: ProposalsSettings,
    operations: Operations | None = None,
    directory: Directory | None = None,
) -> tuple[Operations, Directory]:
    """The given parts, else the test plugin's, else the installed entry points'."""
    if operations is not None and directory is not None:
        return operations, directory
    if settings.proposals.test_plugin:
        module, _, attr = settings.proposals.test_plugin.partition(":")
        plugged_ops, plugged_dir = getattr(import_module(module), attr)()
        return operations or plugged_ops, directory or plugged_dir
    return operations or load_operations(), directory or load_directory()
