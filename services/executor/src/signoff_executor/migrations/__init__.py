"""Alembic environment of schema ``executor`` (found by entry point ``signoff.migrations``)."""
