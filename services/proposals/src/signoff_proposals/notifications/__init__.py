"""Notifications: webhooks, Slack-compatible chat messages and e-mail notices of proposals.

Why a module of the proposals service and not a service of its own: it needs what only this
service has — the proposals table (is a proposal still waiting when its reminder is due?), the
operations (the rendered preview and ``authorize``, which picks the people who may approve) and
the directory — and it adds no trust: the signing secret of a webhook is a notification secret,
never the contract signing key, and a notice authorizes nothing. A separate service would need
its own copy of the operations and the directory and a read grant on ``proposals``, for nothing.

Why it still consumes the ``events`` exchange (queue ``proposals.notifications``) instead of
writing delivery rows in the transactions that change a proposal: every state change already
publishes its ``ProposalEvent`` through the outbox, so consuming it keeps the notifier out of
every writer (intake, decisions, sweeps, outcomes) and makes it a replica-safe consumer like any
other. ``enqueue`` turns an event into ``notification_deliveries`` rows (idempotent by message
id); ``delivery`` sends them outside any transaction, with retries, back-off and a dead state,
so a slow or failing endpoint never delays a decision. ``routes`` manages subscriptions and
people's preferences; ``signing`` is the webhook signature a receiver verifies.
"""
