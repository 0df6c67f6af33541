"""A card-payment provider simulator and its async client.

Stripe-like refund idempotency, an append-only effect ledger and injectable faults, so the
executor and the reconciler can be tested against the ways a real provider fails.
"""
