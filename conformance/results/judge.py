"""The one judge: pass / fail / xfail / xpass / error for every kind of cell.

A cell's runner reports what it observed: the failures it found (each with its evidence, the
processor options of its case, and whether it is an error of the cell rather than a finding
about the subject), or none. The judge looks each failure up in the known findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from conformance import expectations
from conformance.results.verdict import CellKey, Verdict


@dataclass(frozen=True)
class Failure:
    evidence: str
    options: tuple[tuple[str, object], ...] = ()  # the processor options of the failing case
    error: bool = False  # the cell could not run (set-up, crash of the harness): `error`
    inconclusive: bool = False  # too little was compared to stand for a pass: `inconclusive`
    extra: tuple[tuple[str, object], ...] = ()  # kept in the verdict's data if it is chosen

    def __post_init__(self) -> None:
        object.__setattr__(self, "evidence", stable_text(self.evidence))


# A repr's memory address (`<PIL.Image.Image image mode=RGB size=16x16 at 0x7F78EFC0C550>`, in
# vLLM's "Failed to apply ... on data=..." messages) differs from run to run; without it a
# cell's evidence, and the reports and baseline made from it, reproduce run after run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_text(text: str) -> str:
    return _ADDRESS.sub("", text)


# vLLM's backend refusing an architecture below a transformers version (`Base.check_version`,
# 0.34.0's "for Aria" at 5.18.0): the release's own statement that it does not serve the
# checkpoint on this version, as its transformers window is: no disagreement to judge
_BACKEND_GATE = re.compile(r"Transformers modeling backend requires transformers>=(\S+) for "
                           r"(.+?), but got (\S+)")


def backend_gate(failures: list[Failure]) -> str | None:
    """Why the cell is n/a where every failure is the backend's own version gate."""
    found = [_BACKEND_GATE.search(f.evidence) for f in failures]
    if not failures or not all(found):
        return None
    first = found[0]
    return (f"the backend serves {first[2]} from transformers {first[1]} on, not on "
            f"{first[3]} (its own version gate: '{first[0]}')")


def _options_text(options: tuple[tuple[str, object], ...]) -> str:
    if not options:
        return ""
    return " (with " + ", ".join(f"{k}={v!r}" for k, v in options) + ")"


def known(key: CellKey, failure: Failure) -> expectations.Finding | None:
    """The finding that explains `failure` in this cell (None: a new failure)."""
    return expectations.explain(key.fixture, key.check, key.version, key.subject,
                                failure.evidence, tuple(name for name, _ in failure.options),
                                key.vllm, error=failure.error)


def reference_errors(data: dict) -> list[str]:
    """What the model checks recorded of a reference that raised (`references`: "native" or
    "hf" -> "error: ..."), one text each, as a finding's evidence is matched against."""
    refs = data.get("references")
    if not isinstance(refs, dict):
        return []
    return [f"{ref} reference could not run: {outcome.removeprefix('error: ')}"
            for ref, outcome in refs.items()
            if ref in ("native", "hf") and isinstance(outcome, str)
            and outcome.startswith("error: ")]


def judge(key: CellKey, failures: list[Failure], *, exhaustive: bool, seconds: float = 0.0,
          data: dict | None = None) -> Verdict:
    """`exhaustive`: the cell ran enough to speak for its inputs (a checkpoint-level check's
    fixed inputs; a suite that compared at least its floor of cases), so a known finding that
    applies but did not show is stale (xpass)."""
    data = dict(data or {})

    def explained(failure: Failure) -> expectations.Finding | None:
        return known(key, failure)

    if not failures:
        # a reference that could not run is left out of the comparison (the cell is judged
        # against the others); a finding whose evidence that reference's error shows makes
        # the cell known: native vLLM refusing a checkpoint the HF model and the backend serve
        for text in reference_errors(data):
            if (found := known(key, Failure(text))) is not None:
                data["differences"] = [text[:300]]
                return Verdict.of(key, "xfail", f"{found.reason} [observed: {text}]", seconds,
                                  data, found.id)
        stale = expectations.applicable(key.fixture, key.check, key.version, key.subject,
                                        key.vllm)
        if exhaustive and stale and stale.stale_in(data):
            return Verdict.of(key, "xpass", f"listed as known but passed: {stale.reason}",
                              seconds, data, stale.id)
        return Verdict.of(key, "pass", "", seconds, data)
    if gate := backend_gate(failures):
        return Verdict.of(key, "n/a", gate, seconds, data)
    unknown = [f for f in failures if explained(f) is None]
    chosen = (unknown or failures)[0]
    data.update(chosen.extra)
    # every distinct difference, known or not, stays on record (the gate compares a known
    # cell's differences with the baseline's), and those no finding explains, apart
    data["differences"] = [f.evidence[:300] for f in failures]
    if unknown and len(failures) > 1:
        data["unexplained"] = [f.evidence[:300] for f in unknown]
    more = f" (+{len(failures) - 1} other distinct failure(s))" if len(failures) > 1 else ""
    if unknown:
        status = ("error" if chosen.error else
                  "inconclusive" if chosen.inconclusive else "fail")
        return Verdict.of(key, status, chosen.evidence + _options_text(chosen.options) + more,
                          seconds, data)
    findings = [explained(f) for f in failures]
    finding = findings[0]
    assert finding is not None
    if len({f.id for f in findings if f}) > 1:
        data["findings"] = sorted({f.id for f in findings if f})
    detail = f"{finding.reason} [observed: {chosen.evidence}]" + _options_text(chosen.options)
    return Verdict.of(key, "xfail", detail + more, seconds, data, finding.id)
