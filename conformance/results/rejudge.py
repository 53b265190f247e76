"""Judge a results file's known cells again against findings.toml as it is now, from the
differences each cell stored, without running anything: rewording a finding's evidence (or
splitting a finding) must leave every known cell known, by the same finding or one split from it.

Each cell's evidence (results/evidence.py) keeps every difference with what the judge made
of it: whether it was an error of the cell, the processor options of its case (where a result
recorded before they were kept has none, a difference counts as explained only if it is, by
the same finding, under every set of the options findings ask for that explains it at all).
The judge keeps each difference's first 300 characters (`evidence.CUT`), the one the verdict
shows whole: a difference cut short that no finding explains within what was kept cannot be
judged here (`cut`): rerun its cell (`conformance run --fixtures F --checks C --versions V
--subjects S`).

`python -m conformance.results.rejudge [RESULTS] [--write]` prints every known cell whose
verdict would change and, with --write, records the new finding ids (a split) in the file.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from conformance.expectations import Finding, load
from conformance.paths import ROOT
from conformance.results.evidence import CUT, Difference, Evidence


def stored_differences(cell: dict) -> list[tuple[Difference, str]]:
    """Each difference the cell kept with its text: whole for the one its verdict shows."""
    evidence = Evidence.from_dict(cell["evidence"])
    return [(d, evidence.shown_text if i == evidence.shown else d.text)
            for i, d in enumerate(evidence.differences)]


def _option_sets(findings: Iterable[Finding]) -> list[tuple[str, ...]]:
    names = sorted({option for finding in findings for option in finding.option_names})
    return [combo for n in range(len(names) + 1) for combo in itertools.combinations(names, n)]


def explaining(findings: tuple[Finding, ...], cell: dict, difference: Difference,
               text: str) -> set[str]:
    """The ids of the findings that explain `text` in this cell, one per option set that
    lets any explain it (empty: none does)."""
    error = difference.error
    recorded = difference.options
    found = set()
    sets = (_option_sets(findings) if recorded is None
            else [tuple(name for name, _ in recorded)])
    for options in sets:
        for finding in findings:
            if finding.applies(cell["fixture"], cell["check"], cell["version"], cell["subject"],
                               options, cell.get("vllm")) and \
                    finding.shown_by(cell["check"], text, cell["fixture"]) and \
                    (finding.explains_error or not error):
                found.add(finding.id)
                break
    return found


@dataclass
class Rejudged:
    cell: dict
    finding: str = ""  # the finding of its first difference now ("" if none explains it)
    findings: list[str] = field(default_factory=list)  # of every difference, where one does
    unexplained: list[str] = field(default_factory=list)  # whole differences no finding explains
    cut: list[str] = field(default_factory=list)  # cut short and unexplained: undecidable here
    # per difference, the findings that explain it now (several: its options decide)
    explained: list[set[str]] = field(default_factory=list)

    @property
    def label(self) -> str:
        c = self.cell
        return f"{c['fixture']} / {c['subject']} / {c['check']} / transformers {c['version']}"

    @property
    def still_known(self) -> bool:
        return bool(self.finding) and not self.unexplained


def rejudge_cell(cell: dict, findings: tuple[Finding, ...]) -> Rejudged:
    result = Rejudged(cell)
    for index, (difference, text) in enumerate(stored_differences(cell)):
        ids = explaining(findings, cell, difference, text)
        result.explained.append(ids)
        cut = index > 0 and difference.cut
        if not ids:
            (result.cut if cut else result.unexplained).append(text)
        elif len(ids) == 1:
            result.findings += sorted(ids)
            if index == 0:
                result.finding = next(iter(ids))
        # several ids: the failing case's options decide, which the cell did not store; as
        # the first difference it leaves the cell's finding unknown ("")
    return result


def rejudge(cells: Iterable[dict], findings: tuple[Finding, ...] | None = None
            ) -> list[Rejudged]:
    """Every known (xfail) cell of `cells`, judged again."""
    findings = load() if findings is None else findings
    return [rejudge_cell(cell, findings) for cell in cells if cell["status"] == "xfail"]


def rewritten(evidence: dict, result: Rejudged, known: set[str]) -> dict:
    """The cell's evidence with each difference's finding as re-judged (after a split): the
    one that explains it now; where several do (its options decide) or it is cut short and
    none does (undecidable here), the one it had, if that still exists."""
    kept = Evidence.from_dict(evidence)
    changed = []
    for difference, ids in zip(kept.differences, result.explained, strict=True):
        if len(ids) == 1:
            finding = next(iter(ids))
        elif difference.finding in known and (difference.finding in ids or
                                              (not ids and difference.cut)):
            finding = difference.finding
        else:
            finding = ""
        changed.append(replace(difference, finding=finding))
    return replace(kept, differences=tuple(changed)).to_dict()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default=str(ROOT / "reports" / "baseline.json"))
    parser.add_argument("--write", action="store_true",
                        help="record each cell's finding as re-judged (after a split)")
    args = parser.parse_args(argv)
    path = Path(args.results)
    payload = json.loads(path.read_text())
    findings = load()
    reasons = {f.id: f.reason for f in findings}
    known = set(reasons)
    changed = 0
    for result in rejudge(payload["cells"], findings):
        cell = result.cell
        for text in result.cut:
            print(f"UNDECIDABLE (cut at {CUT} characters) {result.label}: {text[:120]}")
        if not result.still_known:
            changed += 1
            why = result.unexplained[:1] or ["its first difference no longer names one finding"]
            print(f"NO LONGER KNOWN {result.label}: {why[0][:160]}")
        elif result.finding != cell["finding"]:
            changed += 1
            print(f"ANOTHER FINDING {result.label}: {cell['finding']} -> {result.finding}")
            if args.write:  # its line is rendered from the finding's reason
                cell["finding"] = result.finding
        if args.write:
            cell["evidence"] = rewritten(cell["evidence"], result, known)
    if args.write:
        path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(f"{changed} known cell(s) would change")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
