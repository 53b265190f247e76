"""What every command shares: defaults, argument parsing helpers, the one-line error."""

from __future__ import annotations

import sys

from conformance.core.subjects import SUBJECTS
from conformance.paths import REPORTS_DIR

BASELINE = REPORTS_DIR / "baseline.json"
DEFAULT_SUBJECTS = SUBJECTS


def csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code
