"""Test operations, a scriptable fake provider and helpers for the executor's integration tests.

The real domain (``examples/club``) is written elsewhere; these small operations exercise every
path of the executor against a schema of their own (``exectest``), created with plain SQL.
"""
