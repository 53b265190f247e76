"""The one judge: pass / fail / xfail / xpass / error for every kind of cell.

A cell's runner reports what it observed: the failures it found (each with its evidence, the
processor options of its case, and whether it is an error of the cell rather than a finding
about the subject), or none. The judge looks each failure up in the known findings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from conformance import expectations
from conformance.results.evidence import CUT, Difference, Evidence
from conformance.results.verdict import CellKey, Verdict

# how the model checks word a difference against the HF model (checks/model/references.py)
_VS_HF = "vs hf:"


@dataclass(frozen=True)
class Failure:
    evidence: str
    options: tuple[tuple[str, object], ...] = ()  # the processor options of the failing case
    error: bool = False  # the cell could not run (set-up, crash of the harness): `error`
    inconclusive: bool = False  # too little was compared to stand for a pass: `inconclusive`
    extra: tuple[tuple[str, object], ...] = ()  # kept in the verdict's data if it is chosen
    input: str = ""  # the input variant the check found it on, where it names one

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


def recorded(key: CellKey, failure: Failure,
             finding: expectations.Finding | None) -> Difference:
    """A failure as the verdict keeps it: its text, what the judge made of it."""
    part = finding.part_shown(key.check, failure.evidence, key.fixture) if finding else None
    return Difference.of(failure.evidence, finding=finding.id if finding else "",
                         part=part or "", error=failure.error,
                         options=tuple((name, repr(value)) for name, value in failure.options),
                         input=failure.input,
                         reference="hf" if _VS_HF in failure.evidence else "")


def judge(key: CellKey, failures: list[Failure], *, exhaustive: bool, seconds: float = 0.0,
          data: dict | None = None) -> Verdict:
    """`exhaustive`: the cell ran enough to speak for its inputs (a checkpoint-level check's
    fixed inputs; a suite that compared at least its floor of cases), so a known finding that
    applies but did not show is stale (xpass)."""
    data = dict(data or {})
    if not failures:
        # a reference that could not run is left out of the comparison (the cell is judged
        # against the others); a finding whose evidence that reference's error shows makes
        # the cell known: native vLLM refusing a checkpoint the HF model and the backend serve
        for text in reference_errors(data):
            failure = Failure(text)
            if (found := known(key, failure)) is not None:
                evidence = Evidence.showing([recorded(key, failure, found)], 0, failure.evidence)
                return Verdict.of(key, "xfail", "", seconds, data, found.id, evidence)
        stale = expectations.applicable(key.fixture, key.check, key.version, key.subject,
                                        key.vllm)
        if exhaustive and stale and stale.stale_in(data):
            return Verdict.of(key, "xpass", f"listed as known but passed: {stale.reason}",
                              seconds, data, stale.id)
        return Verdict.of(key, "pass", "", seconds, data)
    if gate := backend_gate(failures):
        return Verdict.of(key, "n/a", gate, seconds, data)
    findings = [known(key, f) for f in failures]
    # every distinct difference, known or not, stays on record (the gate compares a known
    # cell's differences with the baseline's); the verdict shows the first no finding
    # explains, else the first
    differences = [recorded(key, f, found) for f, found in zip(failures, findings, strict=True)]
    unknown = [i for i, found in enumerate(findings) if found is None]
    shown = (unknown or [0])[0]
    chosen = failures[shown]
    data.update(chosen.extra)
    evidence = Evidence.showing(differences, shown, chosen.evidence)
    if unknown:
        status = ("error" if chosen.error else
                  "inconclusive" if chosen.inconclusive else "fail")
        return Verdict.of(key, status, "", seconds, data, evidence=evidence)
    finding = findings[0]
    assert finding is not None
    return Verdict.of(key, "xfail", "", seconds, data, finding.id, evidence)


# Results of schema 1 (before evidence was data) kept a verdict's evidence as text: the detail
# `<reason> [observed: <evidence>] (with <options>) (+N other distinct failure(s))` and
# data["differences"] (each cut), data["unexplained"], data["findings"]. `upgrade` reads them
# back once, here, where they were written: nothing else parses a verdict's text.
_MORE = re.compile(r" \(\+\d+ other distinct failure\(s\)\)$")
_OPTIONS = re.compile(r" \(with ((?:\w+=.*?)(?:, \w+=.*?)*)\)$", re.S)
_SUITE_ERRORS = ("setup: ", "every generated case was discarded: ")
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|StopIteration)\b")
_OBSERVED = " [observed: "


def _split_v1(detail: str) -> tuple[str, tuple[tuple[str, str], ...], bool]:
    """(evidence, options, whether it was an xfail's) of a schema-1 detail."""
    text = _MORE.sub("", detail)
    _, found, rest = text.partition(_OBSERVED)
    if found:
        text = rest
    options: tuple[tuple[str, str], ...] = ()
    if (match := _OPTIONS.search(text)) and (not found or text[:match.start()].endswith("]")):
        pairs = re.split(r", (?=\w+=)", match.group(1))
        options = tuple(tuple(pair.split("=", 1)) for pair in pairs)  # type: ignore[misc]
        text = text[:match.start()]
    if found:
        text = text.removesuffix("]")
    return text, options, bool(found)


def _candidates(cell: dict, text: str, cut: bool, findings: list[expectations.Finding]
                ) -> list[tuple[str, str]]:
    """(id, part) of each finding that may have explained `text` (whatever the failing
    case's options were, which schema 1 did not keep); a cut text's explaining words may lie
    beyond the cut: any that applies, the part unknown."""
    found = []
    for finding in findings:
        if not finding.applies(cell["fixture"], cell["check"], cell["version"],
                               cell["subject"], finding.option_names, cell.get("vllm")):
            continue
        if part := finding.part_shown(cell["check"], text, cell["fixture"]):
            found.append((finding.id, part))
        elif cut:
            found.append((finding.id, ""))
    return found


def _assigned(candidates: list[list[tuple[str, str]]], named: list[str]
              ) -> list[tuple[str, str]]:
    """One finding per explained difference, covering the findings the cell named where
    the candidates allow: the judge recorded every finding that explained one."""
    chosen: list[tuple[str, str] | None] = [c[0] if len(c) == 1 else None for c in candidates]
    for index, options in enumerate(candidates):
        if chosen[index] is None and options:
            taken = {c[0] for c in chosen if c}
            fresh = [o for o in options if o[0] in named and o[0] not in taken]
            chosen[index] = (fresh or [o for o in options if o[0] in named] or options)[0]
    return [c or ("", "") for c in chosen]


def upgrade(cell: dict) -> dict:
    """A schema-1 cell as schema 2 writes it: its evidence as data (`Verdict.evidence`)."""
    cell = dict(cell)
    data = dict(cell.get("data") or {})
    kept = [str(t) for t in data.pop("differences", None) or []]
    unexplained = [str(t) for t in data.pop("unexplained", None) or []]
    findings = list(data.pop("findings", None) or [])
    cell["data"] = data
    detail = cell.get("detail", "")
    if not kept and _OBSERVED not in detail:
        return cell  # no judge saw a difference: its detail is all it says
    whole, options, _ = _split_v1(detail)
    kept = kept or [whole[:CUT]]
    shown = next((i for i, t in enumerate(kept) if whole.startswith(t) and
                  (cell["status"] == "xfail" or not unexplained or t in unexplained)), 0)
    by_id = {f.id: f for f in expectations.load()}
    named = [by_id[i] for i in [cell.get("finding"), *findings] if i in by_id]
    explained = [cell["status"] == "xfail" or (bool(unexplained) and text not in unexplained)
                 for text in kept]
    ids = [f.id for f in named]
    found = _assigned([_candidates(cell, whole if i == shown else text,
                                   i != shown and len(text) >= CUT, named or
                                   list(by_id.values())) if explained[i] else []
                       for i, text in enumerate(kept)], ids)
    differences = []
    for index, text in enumerate(kept):
        full = whole if index == shown else text
        finding, part = found[index]
        error = (cell["status"] == "error" and index == shown) or text.startswith(
            _SUITE_ERRORS) or ("compared" not in data and bool(_RAISED.match(text)))
        differences.append(Difference.of(
            full, finding=finding, part=part, error=error,
            options=options if index == shown else None,
            reference="hf" if _VS_HF in full else ""))
    cell.pop("detail", None)
    cell["evidence"] = Evidence.showing(differences, shown, whole).to_dict()
    return cell
