from signoff_runtime.migrations import run_env

from signoff_executor.tables import metadata

run_env("executor", metadata)
