"""Judge a results file's known cells again against findings.toml as it is now, from the
differences each cell stored, without running anything: rewording a finding's evidence (or
splitting a finding) must leave every known cell known, by the same finding or one split from it.

What a cell stored is not all the judge saw, so each unknown is taken every way it could be:
  - the judge keeps each difference's first 300 characters (`gate.CUT`); the first one, which
    names the cell's finding, is whole in the detail's `[observed: ...]`. A difference cut
    short that no finding explains within what was kept cannot be judged here (`cut`): rerun
    its cell (`conformance run --fixtures F --checks C --versions V --subjects S`);
  - the processor options of each failing case are not stored: a difference counts as
    explained only if it is, by the same finding, under every set of the options findings ask
    for that explains it at all;
  - whether a difference was an error of the cell (set-up, a search that discarded every
    case, a checkpoint-level check that raised) is read from its wording, as the runners
    write it (`is_error`).

`python -m conformance.results.rejudge [RESULTS] [--write]` prints every known cell whose
verdict would change and, with --write, records the new finding ids (a split) in the file.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.expectations import Finding, load
from conformance.results.gate import CUT, observed

# the suites' errors (conformance/run/suite.py): set-up failed, or every case was discarded
SUITE_ERRORS = ("setup: ", "every generated case was discarded: ")
# a checkpoint-level check that raised is recorded as the bare exception (run/cell.py)
RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|StopIteration)\b")


def is_error(cell: dict, text: str) -> bool:
    """Whether the judge took `text` as an error of the cell, not a difference."""
    if text.startswith(SUITE_ERRORS):
        return True
    # a suite cell's data counts its cases; a checkpoint cell whose check raised has none
    return "compared" not in cell["data"] and bool(RAISED.match(text))


def stored_differences(cell: dict) -> list[tuple[str, bool]]:
    """Each difference the cell kept, with whether its end was cut off; the first one whole."""
    kept = [str(text) for text in cell["data"].get("differences") or []]
    whole = observed(cell["detail"])
    if not kept:
        return [(whole, False)]
    if whole.startswith(kept[0]):
        kept[0] = whole
    return [(text, index > 0 and len(text) >= CUT) for index, text in enumerate(kept)]


def _option_sets(findings: Iterable[Finding]) -> list[tuple[str, ...]]:
    names = sorted({option for finding in findings for option in finding.option_names})
    return [combo for n in range(len(names) + 1) for combo in itertools.combinations(names, n)]


def explaining(findings: tuple[Finding, ...], cell: dict, text: str) -> set[str]:
    """The ids of the findings that explain `text` in this cell, one per option set that
    lets any explain it (empty: none does)."""
    error = is_error(cell, text)
    found = set()
    for options in _option_sets(findings):
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

    @property
    def label(self) -> str:
        c = self.cell
        return f"{c['fixture']} / {c['subject']} / {c['check']} / transformers {c['version']}"

    @property
    def still_known(self) -> bool:
        return bool(self.finding) and not self.unexplained


def rejudge_cell(cell: dict, findings: tuple[Finding, ...]) -> Rejudged:
    result = Rejudged(cell)
    for index, (text, cut) in enumerate(stored_differences(cell)):
        ids = explaining(findings, cell, text)
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


def main(argv: list[str] | None = None) -> int:
    from conformance.paths import ROOT

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
            if args.write:
                # the detail opens with the finding's reason, then the evidence it saw
                _, seen, rest = cell["detail"].partition(" [observed: ")
                cell["detail"] = reasons[result.finding] + seen + rest
                cell["finding"] = result.finding
        if args.write:
            ids = set(result.findings)
            if result.cut:  # what explained a cut difference is not decidable: keep the record
                ids |= set(cell["data"].get("findings", [])) & known
            if len(ids) > 1:  # as the judge records them
                cell["data"]["findings"] = sorted(ids)
            else:
                cell["data"].pop("findings", None)
    if args.write:
        path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    print(f"{changed} known cell(s) would change")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
