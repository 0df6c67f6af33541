from signoff_runtime.migrations import run_env

from signoff_web.tables import SCHEMA, metadata

run_env(SCHEMA, metadata)
