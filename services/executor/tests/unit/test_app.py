"""The app's wiring, without connecting anywhere: one subscriber, bounded, manual acks."""

from faststream import AckPolicy
from signoff_conformance.toy.domain import GrantCredit
from signoff_conformance.toy.vouchers import SendVoucher, VoucherProvider
from signoff_executor.app import create_app
from signoff_executor.settings import RESERVED_CONNECTIONS, ExecutorGroup, ExecutorSettings
from signoff_runtime.registry import Operations


def test_contract_subscriber_has_bounded_prefetch_and_manual_acks() -> None:
    settings = ExecutorSettings(executor=ExecutorGroup(concurrency=5, graceful_timeout_s=3))
    app = create_app(settings, Operations([GrantCredit(), SendVoucher(VoucherProvider())]))
    runtime = app.state.runtime
    [subscriber] = runtime.broker.subscribers
    assert subscriber.queue.name == f"{settings.amqp.prefix}.executor.contracts"
    assert subscriber.queue.arguments["x-queue-type"] == "quorum"
    assert subscriber.channel.prefetch_count == 5  # the window is the concurrency
    assert runtime.engine.pool.size() == settings.db.pool_size >= 5 + RESERVED_CONNECTIONS
    assert subscriber.ack_policy is AckPolicy.MANUAL
    assert runtime.broker.config.graceful_timeout == 3
    paths = {getattr(route, "path", None) for route in app.routes}
    assert paths == {"/healthz", "/livez", "/readyz", "/metrics"}
    assert len(runtime.loops) == 2  # the outbox relay and its pruning
