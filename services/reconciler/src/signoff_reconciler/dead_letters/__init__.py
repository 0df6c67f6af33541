"""Every queue's dead letters, archived for operators and replayed on request — once.

The reconciler (the operator-facing service) consumes each ``<queue>.dlq`` and archives every
letter into ``reconciler.dead_letters`` with its reason, then acks it: a dead letter is never
dropped (a failed archive is requeued after a pause — a DLQ has no delivery limit) and never
blocks the work queue it came from. The reason is the consumer's own (``x-signoff-reason`` /
``x-signoff-detail``, set by ``settle``) or RabbitMQ's (``x-first-death-reason``, e.g.
``delivery_limit`` for a message whose consumer died on every delivery). At-least-once
dead-lettering may bring a letter twice: it is archived once (a partial unique index on
queue + message id among letters not yet replayed).

``replay`` re-publishes the original body and properties to the original queue *only* (through
the ``replay`` exchange, where each work queue is bound by its own name, so a topic binding does
not fan it out again and nobody needs ``amq.default``), persistent and confirmed, and marks the
row replayed — who, when, why — in the same transaction; a replayed letter is refused a second
time. The consumer's own dedup (inbox) makes a replay of a message it did process harmless.

Senders (``signoff_runtime.senders``): the archive records each letter's original sender in
``x-signoff-sender`` (believed from the queue's own consumer, else the letter's ``user_id``) and
the broker user that wrote the letter in ``x-signoff-dead-lettered-by``. A replay is published
with the replayer's own ``user_id`` (an operator's ``cli`` user in production) and that original
sender, so the consumer accepts it exactly when it would have accepted the original. Bearer
tokens are redacted before a letter is stored (``signoff_reconciler.redaction``).

``handlers`` consumes and archives, ``replay`` sends a letter back, ``repository`` is the SQL.
"""
