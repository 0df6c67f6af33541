"""Run-time machinery every signoff service shares.

The lifecycle services never import one another; what they have in common — how to reach
PostgreSQL and RabbitMQ, the queue topology, the transactional outbox and inbox, token and
contract verification, problem documents, logs — lives here once, so each guarantee has exactly
one implementation to test and to fault-inject.
"""
