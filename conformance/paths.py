"""Where the project keeps things: the repository, its env specs, and the build cache."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV_DIR = ROOT / "env"
REPORTS_DIR = ROOT / "reports"


def cache_dir() -> Path:
    """Built fixtures and transformers overlays: outside git, shared by clones of this repo."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "vllm-mm-conformance"
    path = Path(os.environ.get("CONFORMANCE_CACHE", default))
    path.mkdir(parents=True, exist_ok=True)
    return path
