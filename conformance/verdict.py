"""The result of one cell: a fixture x transformers version x check, with its evidence."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

STATUSES = ("pass", "fail", "xfail", "xpass", "error", "crash", "timeout", "n/a")
BAD = frozenset({"fail", "xpass", "error", "crash", "timeout"})


@dataclass
class Verdict:
    fixture: str
    version: str
    check: str
    status: str
    detail: str = ""  # evidence: the first difference, the error, or the expected-failure reason
    seconds: float = 0.0
    data: dict = field(default_factory=dict)  # measured values worth keeping (ids, ranges)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, line: str) -> Verdict:
        return cls(**json.loads(line))

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.fixture, self.version, self.check)
