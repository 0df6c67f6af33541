"""The ``proposals`` schema's Alembic environment (entry point ``signoff.migrations``)."""
