from signoff_runtime.migrations import run_env

from signoff_agent.tables import SCHEMA, metadata

run_env(SCHEMA, metadata)
