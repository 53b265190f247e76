"""The result of one cell: a fixture x transformers version x check, with its evidence."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

STATUSES = ("pass", "fail", "xfail", "xpass", "inconclusive", "error", "crash", "timeout", "n/a")
# `inconclusive`: a suite cell that compared fewer cases than its floor (or never exercised a
# sub-property it claims) and no finding explains why: not a pass
BAD = frozenset({"fail", "xpass", "inconclusive", "error", "crash", "timeout"})


@dataclass
class Verdict:
    fixture: str
    version: str
    check: str
    status: str
    detail: str = ""  # evidence: the first difference, the error, or the expected-failure reason
    seconds: float = 0.0
    data: dict = field(default_factory=dict)  # measured values worth keeping (ids, ranges)
    subject: str = "vllm-backend"  # what was checked (against native vLLM / HF)
    finding: str = ""  # the known finding's id, for xfail and xpass

    @classmethod
    def of(cls, key: CellKey, status: str, detail: str = "", seconds: float = 0.0,
           data: dict | None = None, finding: str = "") -> Verdict:
        return cls(key.fixture, key.version, key.check, status, detail, seconds, data or {},
                   key.subject, finding)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, line: str) -> Verdict:
        return cls(**json.loads(line))

    @property
    def key(self) -> CellKey:
        return CellKey(self.fixture, self.version, self.subject, self.check)


class CellKey(NamedTuple):
    fixture: str
    version: str
    subject: str
    check: str

    def label(self) -> str:
        return f"{self.fixture} / {self.subject} / {self.check} / transformers {self.version}"
