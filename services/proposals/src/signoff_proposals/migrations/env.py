from signoff_runtime.migrations import run_env

from signoff_proposals.tables import metadata

run_env("proposals", metadata)
