"""Where the project keeps things: the repository, its env specs, and the build cache."""

from __future__ import annotations

from pathlib import Path

from fixtures.cache import cache_dir  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
ENV_DIR = ROOT / "env"
REPORTS_DIR = ROOT / "reports"
