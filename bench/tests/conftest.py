"""The harness's own modules, for the tests that call them directly (``make bench`` runs them
with ``PYTHONPATH=bench``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # signoff_bench: a name no other suite uses
