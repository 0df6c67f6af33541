from signoff_runtime.migrations import run_env

from signoff_reconciler.tables import metadata

run_env("reconciler", metadata)
