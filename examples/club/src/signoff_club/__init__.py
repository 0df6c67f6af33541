"""signoff's reference domain: a sports club's orders, refunds and email broadcasts.

The operations an assistant may propose here live in ``signoff_club.operations``, one module
each; the lifecycle services load them by entry point and never import this package directly.
"""
