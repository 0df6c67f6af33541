"""The web schema's Alembic environment (run by ``signoff_runtime.migrations.upgrade_all``)."""
