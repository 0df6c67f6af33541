"""The reconciler: turns an uncertain external effect into an authoritative outcome by asking.

It never repeats an effect. For each attempt the executor could not conclude it keeps a check
row, and a loop asks the operation's ``reconcile`` (which asks the provider with the attempt's own
idempotency key) until it answers; the answer goes back to proposals through the outbox.
"""
