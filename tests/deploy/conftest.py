"""Static checks of deploy/, docs/ and docker-compose.yml (no cluster, no Docker engine)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # deploy_files, kustomize_render
