"""Alembic environment of schema ``reconciler`` (found by entry point ``signoff.migrations``)."""
