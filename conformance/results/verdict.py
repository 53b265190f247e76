"""The result of one cell: a fixture x vLLM x transformers version x subject x check, with its
evidence (results/evidence.py). Results recorded before vLLM was an axis have no `vllm`: they
were vLLM 0.31.0's; results recorded before cells kept logs have no `log`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from conformance import expectations
from conformance.core.subjects import VLLM_BACKEND
from conformance.core.vllms import DEFAULT_VLLM
from conformance.results.evidence import Evidence, line

STATUSES = ("pass", "fail", "xfail", "xpass", "inconclusive", "error", "crash", "timeout", "n/a")
# `inconclusive`: a suite cell that compared fewer cases than its floor (or never exercised a
# sub-property it claims) and no finding explains why: not a pass
BAD = frozenset({"fail", "xpass", "inconclusive", "error", "crash", "timeout"})
# A failed cell's data: whose problem it is where not the backend's (`conformance check`'s
# attribution: {"owner": ..., "part": ..., "cause": ..., "error": ...})
OWNER = "owner"


def owner_text(owner: str, cause: str) -> str:
    return f"{owner}, not the backend's: {cause}"


def owner_line(verdict: Verdict) -> str | None:
    """Whose problem a failed cell is, where `check` found it is not the backend's."""
    problem = verdict.data.get(OWNER)
    return owner_text(problem["owner"], problem["cause"]) if isinstance(problem, dict) else None


@dataclass
class Verdict:
    fixture: str
    version: str
    check: str
    status: str
    # what it says in one line: where it has evidence, rendered from it (never written to
    # results.json: `evidence` is); else its own (an n/a's or an xpass's reason, an error
    # of the harness that no judge saw)
    detail: str = ""
    seconds: float = 0.0
    data: dict = field(default_factory=dict)  # measured values worth keeping (ids, ranges)
    subject: str = VLLM_BACKEND  # what was checked (against native vLLM / HF)
    finding: str = ""  # the known finding's id, for xfail and xpass
    vllm: str = DEFAULT_VLLM  # the vLLM under test: a release, or "version@folder"
    # the cell's log (its whole output and error text), relative to the run folder; None: a
    # cell that was not bad keeps none (`run/logs.py`)
    log: str | None = None
    # every difference the cell observed, as the judge judged it; None: no judge saw one (a
    # pass, an n/a, a crash or timeout of its worker)
    evidence: Evidence | None = None

    def __post_init__(self) -> None:
        if self.evidence is not None and not self.detail:
            self.detail = self.rendered()

    @property
    def observed(self) -> str:
        """What it observed: the difference it shows, whole (else its detail)."""
        return self.evidence.shown_text if self.evidence else self.detail

    def rendered(self) -> str:
        assert self.evidence is not None
        return line(self.status, self.evidence, reason_of(self.finding))

    @classmethod
    def of(cls, key: CellKey, status: str, detail: str = "", seconds: float = 0.0,
           data: dict | None = None, finding: str = "",
           evidence: Evidence | None = None) -> Verdict:
        return cls(key.fixture, key.version, key.check, status, detail, seconds, data or {},
                   key.subject, finding, key.vllm, evidence=evidence)

    def to_dict(self) -> dict:
        fields = asdict(self)
        if fields["log"] is None:  # a file without logs reads as it did before they existed
            del fields["log"]
        if self.evidence is None:
            del fields["evidence"]
        else:  # written once: the line is rendered from it
            fields["evidence"] = self.evidence.to_dict()
            del fields["detail"]
        return fields

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=str)

    @classmethod
    def from_dict(cls, fields: dict) -> Verdict:
        fields = dict(fields)
        if (found := fields.get("evidence")) is not None:
            fields["evidence"] = Evidence.from_dict(found)
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.from_dict(json.loads(text))

    @property
    def key(self) -> CellKey:
        return CellKey(self.fixture, self.version, self.subject, self.check, self.vllm)


def reason_of(finding: str) -> str | None:
    """A finding's statement in this checkout's findings.toml (None: it has no such id)."""
    return next((f.reason for f in expectations.load() if f.id == finding), None)


class CellKey(NamedTuple):
    fixture: str
    version: str  # transformers
    subject: str
    check: str
    # last, with a default: keys written as 4-item lists (workers, old files) still load
    vllm: str = DEFAULT_VLLM

    def label(self) -> str:
        on = "" if self.vllm == DEFAULT_VLLM else f" / vLLM {self.vllm}"
        return (f"{self.fixture} / {self.subject} / {self.check} / transformers {self.version}"
                + on)
