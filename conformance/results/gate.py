"""Gate a run against the committed baseline: regressions fail; fixes and known failures listed
(the known ones by the finding that explains them).

A cell known (xfail) in both runs is looked into, not waved through: another finding, a
difference the baseline's cell did not show, or a shared difference drifting further than the
baseline's fail the gate, as a cell that passed and is known now does unless accepted.

Each (vLLM, transformers version) column of the run is compared with one column of the
baseline (`pair_columns`): its own where the baseline has it, else the nearest the baseline
has (`nearest`), or the one `--baseline-version` / `--baseline-vllm` chose. A gate that
compared no cell has no verdict (`GateResult.status`): it never passes.

What a comparison says is written by `gate_report.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from conformance.core.vllms import sort_key
from conformance.results.cells import cells_text, one_line
from conformance.results.evidence import Difference
from conformance.results.known import finding_of
from conformance.results.releases import ReleaseDiff, compare_releases
from conformance.results.verdict import BAD, CellKey, Verdict
from impl.version import bounds, in_range, parse_version

GOOD = frozenset({"pass"})
DRIFT = 1.1  # a shared difference may drift 10% beyond the baseline's: fp noise, not news


def differences(verdict: Verdict) -> list[Difference]:
    """Every difference a cell recorded: its evidence's, else (a crash, a timeout: no judge
    saw it) its one line, kept as the judge keeps a difference so that the two compare
    alike."""
    if verdict.evidence is not None:
        return list(verdict.evidence.differences)
    return [Difference.of(verdict.detail)]


def outside_bounds(was: Verdict, now: Verdict) -> str | None:
    """Where a cell known in the baseline now fails with the very difference its finding
    explained, on a version the finding's bounds leave out (a candidate release past the last
    one the finding was measured on): what the reviewer does about it, else None. The judge
    never stretches a finding's bounds by itself: the finding is confirmed on the new release
    and its bounds widened, or the cell is a regression."""
    finding = finding_of(was.finding) if was.finding else None
    if finding is None or not finding.versions or in_range(now.version, *bounds(finding.versions)):
        return None
    mine, theirs = differences(now), differences(was)
    if not mine or not all(any(m.same(t) for t in theirs) for m in mine):
        return None
    return (f"{was.finding}: the same difference, on a version its bounds ({finding.versions}) "
            f"leave out: confirm it on {now.version} and widen them")


def larger(now: float, was: float) -> bool:
    """`now` drifts further than `was` beyond the allowance (`magnitude` reads nan as inf:
    beyond any finite drift)."""
    return now > was * DRIFT


def known_changes(was: Verdict, now: Verdict) -> tuple[list[str], bool]:
    """Why a cell known in both runs is news (empty: it is not), and whether it shows fewer
    differences than the baseline's cell (narrowed: news, not a failure)."""
    reasons = []
    if was.finding and now.finding and was.finding != now.finding:
        reasons.append(f"another finding: {now.finding} (was {was.finding})")
    before, after = differences(was), differences(now)
    for difference in after:
        shared = [d for d in before if d.same(difference)]
        if not shared:
            reasons.append(f"a new difference: {one_line(difference.text)}")
            continue
        drifts = [d.drift for d in shared if d.drift is not None]
        if difference.drift is not None and drifts and larger(difference.drift, max(drifts)):
            reasons.append(f"a larger drift: {difference.drift:.3g} (was {max(drifts):.3g}): "
                           f"{one_line(difference.text)}")
    narrowed = any(not any(d.same(a) for a in after) for d in before)
    return list(dict.fromkeys(reasons)), narrowed


@dataclass
class KnownChange:
    was: Verdict
    now: Verdict
    reasons: list[str]  # another finding, a new difference, a larger drift


Column = tuple[str, str]  # (vLLM label, transformers version)


def nearest(version: str, available: Iterable[str],
            parse: Callable[[str], object] = parse_version) -> str | None:
    """The nearest of `available` to `version`: the newest not newer than it, else (all are
    newer) the oldest. A release is gated against the behaviour it replaces, never a later
    one while an earlier one exists. None: nothing available."""
    found = sorted(set(available), key=parse)  # type: ignore[arg-type]
    older = [v for v in found if parse(v) <= parse(version)]  # type: ignore[operator]
    return older[-1] if older else (found[0] if found else None)


def _vllm_version(label: str) -> object:
    return sort_key(label)[0]  # a folder's label ("0.32.1.dev5@src") by its version


@dataclass(frozen=True)
class Pairing:
    """The baseline's column one column of the run is compared with, and why that one."""

    vllm: str
    version: str
    baseline_vllm: str
    baseline_version: str
    # same; nearest (not newer); newer (the nearest: the baseline has no older one); chosen
    how_vllm: str = "same"  # chosen: --baseline-vllm
    how_version: str = "same"  # chosen: --baseline-version

    @property
    def moved(self) -> bool:
        return (self.vllm, self.version) != (self.baseline_vllm, self.baseline_version)

    def text(self) -> str:
        """One line: which baseline column, and by which rule."""
        parts = []
        if self.version != self.baseline_version:
            parts.append(_said("transformers", self.version, self.baseline_version,
                               self.how_version, "--baseline-version"))
        if self.vllm != self.baseline_vllm:
            parts.append(_said("vLLM", self.vllm, self.baseline_vllm, self.how_vllm,
                               "--baseline-vllm"))
        return "; ".join(parts)


def _said(axis: str, mine: str, theirs: str, how: str, option: str) -> str:
    if how == "chosen":
        return f"{axis} {mine} compared with the baseline's {theirs} ({option})"
    nearest_is = "nearest not newer" if how == "nearest" else "nearest (none is older)"
    return (f"{axis} {mine} is not in the baseline: compared with its {nearest_is}, {theirs} "
            f"({option} V to choose)")


def _rule(version: str, chosen: str | None, available: set[str],
          parse: Callable[[str], object]) -> tuple[str, str]:
    if chosen is not None:
        return chosen, "chosen"
    if version in available:
        return version, "same"
    found = nearest(version, available, parse)
    assert found is not None  # callers pass a non-empty `available`
    return found, ("nearest" if parse(found) <= parse(version) else "newer")  # type: ignore


def pair_columns(baseline: list[Verdict], current: list[Verdict],
                 baseline_version: str | None = None,
                 baseline_vllm: str | None = None) -> list[Pairing]:
    """Each column of the run and the baseline's column it is compared with: the same one
    where the baseline has it, else the nearest (`nearest`; the vLLM first, then the
    transformers version among that vLLM's); an option names one for every column. A
    chosen column the baseline lacks is a one-line error (ValueError)."""
    columns: dict[str, set[str]] = {}
    for v in baseline:
        columns.setdefault(v.vllm, set()).add(v.version)
    if not columns:
        return []
    if baseline_vllm is not None and baseline_vllm not in columns:
        raise ValueError(f"the baseline has no cell of vLLM {baseline_vllm} (it has "
                         f"{', '.join(sorted(columns, key=sort_key))}): give one of those "
                         "to --baseline-vllm")
    pairs = []
    for vllm, version in sorted({(c.vllm, c.version) for c in current},
                                key=lambda c: (sort_key(c[0]), parse_version(c[1]))):
        base_vllm, how_vllm = _rule(vllm, baseline_vllm, set(columns), _vllm_version)
        if baseline_version is not None:  # as the baseline spells it: 5.17 is 5.17.0
            try:
                wanted = parse_version(baseline_version)
            except ValueError:
                raise ValueError(f"--baseline-version {baseline_version!r} is not a version "
                                 "(e.g. 5.17.0)") from None
            baseline_version = next((v for v in columns[base_vllm]
                                     if parse_version(v) == wanted), baseline_version)
        if baseline_version is not None and baseline_version not in columns[base_vllm]:
            raise ValueError(
                f"the baseline has no cell of transformers {baseline_version} on vLLM "
                f"{base_vllm} (it has {', '.join(sorted(columns[base_vllm], key=parse_version))})"
                ": give one of those to --baseline-version")
        base_version, how_version = _rule(version, baseline_version, columns[base_vllm],
                                          parse_version)
        pairs.append(Pairing(vllm, version, base_vllm, base_version, how_vllm, how_version))
    return pairs


def paired_baseline(baseline: list[Verdict], pairs: list[Pairing]) -> list[Verdict]:
    """The baseline's cells of the paired columns, each labelled with the run's column it
    is compared with (a baseline column no run column is paired with is left out)."""
    by_column: dict[Column, list[Verdict]] = {}
    for v in baseline:
        by_column.setdefault((v.vllm, v.version), []).append(v)
    return [replace(v, vllm=p.vllm, version=p.version)
            for p in pairs for v in by_column.get((p.baseline_vllm, p.baseline_version), ())]


@dataclass
class GateResult:
    regressions: list[tuple[Verdict, Verdict]] = field(default_factory=list)  # (was, now)
    fixed: list[tuple[Verdict, Verdict]] = field(default_factory=list)
    known: list[Verdict] = field(default_factory=list)  # xfail now, with their reasons
    # pass -> xfail: a finding explains it, but only an explicit --accept lets it through
    newly_known: list[tuple[Verdict, Verdict]] = field(default_factory=list)
    accepted: list[tuple[Verdict, Verdict]] = field(default_factory=list)
    new_failures: list[Verdict] = field(default_factory=list)  # bad now, absent from baseline
    # a known failure in the baseline that is bad now: another difference beside the known one,
    # or the finding no longer shows (xpass: stale, e.g. fixed by the vLLM under test)
    known_now_bad: list[tuple[Verdict, Verdict]] = field(default_factory=list)
    known_changed: list[KnownChange] = field(default_factory=list)  # xfail in both, news
    narrowed: list[tuple[Verdict, Verdict]] = field(default_factory=list)  # fewer differences
    still_failing: list[Verdict] = field(default_factory=list)  # bad in both (accepted then)
    missing: list[Verdict] = field(default_factory=list)  # in the baseline, not run now
    in_both: int = 0  # the cells compared
    only_now: int = 0
    only_baseline: int = 0  # of the paired baseline columns: cells this run did not run
    known_compared: int = 0  # xfail in both runs: their findings and signatures compared
    pairs: list[Pairing] = field(default_factory=list)  # which baseline column, for each

    @property
    def status(self) -> str:
        """pass, fail, or nothing-compared (no cell in both: no verdict, never a pass)."""
        if not self.in_both:
            return "nothing-compared"
        bad = (self.regressions or self.new_failures or self.known_now_bad
               or self.known_changed or self.newly_known)
        return "fail" if bad else "pass"

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "fail": 1, "nothing-compared": 2}[self.status]


def compare(baseline: list[Verdict], current: list[Verdict],
            compare_missing: bool = False, baseline_version: str | None = None,
            baseline_vllm: str | None = None,
            accept: frozenset[str] = frozenset()) -> GateResult:
    """A regression: a cell that passed in the baseline and is bad now (fail, error, crash,
    timeout, or a stale known failure). Cells only in one of the two are listed, not judged,
    except new cells that are bad. A cell known in both fails the gate when another finding
    explains it, or it shows a difference the baseline's did not or a larger drift; a cell
    that passed and is known now fails it unless `accept` holds its finding (or "*").
    Each column of the run is compared with the baseline's column `pair_columns` pairs it
    with: its own, the nearest, or the one `baseline_version` (gating a candidate release
    against the pin) / `baseline_vllm` (what moved between releases) names."""
    pairs = pair_columns(baseline, current, baseline_version, baseline_vllm)
    before: dict[CellKey, Verdict] = {v.key: v for v in paired_baseline(baseline, pairs)}
    now: dict[CellKey, Verdict] = {v.key: v for v in current}
    result = GateResult(pairs=pairs)
    result.in_both = len(before.keys() & now.keys())
    result.only_now = len(now.keys() - before.keys())
    result.only_baseline = len(before.keys() - now.keys())
    for key, verdict in now.items():
        was = before.get(key)
        if verdict.status == "xfail":
            result.known.append(verdict)
        if was is None:
            if verdict.status in BAD:
                result.new_failures.append(verdict)
            continue
        if was.status in GOOD and verdict.status in BAD:
            result.regressions.append((was, verdict))
        elif was.status in GOOD and verdict.status == "xfail":
            taken = "*" in accept or bool(verdict.finding) and verdict.finding in accept
            (result.accepted if taken else result.newly_known).append((was, verdict))
        elif was.status not in GOOD and was.status != "n/a" and verdict.status in GOOD:
            result.fixed.append((was, verdict))
        elif was.status == "xfail" and verdict.status in BAD:
            result.known_now_bad.append((was, verdict))
        elif was.status == "xfail" and verdict.status == "xfail":
            result.known_compared += 1
            reasons, narrowed = known_changes(was, verdict)
            if reasons:
                result.known_changed.append(KnownChange(was, verdict, reasons))
            elif narrowed:
                result.narrowed.append((was, verdict))
        elif was.status in BAD and verdict.status in BAD:
            result.still_failing.append(verdict)
    if compare_missing:
        result.missing = [v for k, v in before.items() if k not in now]
    return result


def nothing_compared(baseline: list[Verdict], current: list[Verdict],
                     pairs: list[Pairing]) -> str:
    """Why a gate compared no cell, and what to do: one line."""
    if not current:
        return "the run holds no cell: run `conformance run` first and gate its folder"
    if not baseline:
        return ("the baseline holds no cell: write one from a trusted run with "
                "`conformance baseline RUN`")
    columns = sorted({f"{p.baseline_version} (vLLM {p.baseline_vllm})" for p in pairs})
    fixtures = sorted({v.fixture for v in current})
    checks = sorted({v.check for v in current})
    return (f"none of the run's {cells_text(len(current))} (fixtures {', '.join(fixtures)}; "
            f"checks {', '.join(checks)}) is among the baseline's cells of transformers "
            f"{', '.join(columns)}: gate a run of fixtures and checks the baseline has, or "
            "refresh the baseline with `conformance baseline RUN`")


def release_changes(baseline: list[Verdict], current: list[Verdict],
                    pairs: list[Pairing]) -> list[ReleaseDiff]:
    """For each vLLM of the run compared with another vLLM of the baseline: the findings
    fixed and new, and the cells that moved, between the two releases."""
    diffs = []
    for old, new in sorted({(p.baseline_vllm, p.vllm) for p in pairs if p.vllm != p.baseline_vllm},
                           key=lambda pair: (sort_key(pair[1]), sort_key(pair[0]))):
        # the baseline's cells keep their vLLM, take the run's version of their column
        mine = [p for p in pairs if (p.baseline_vllm, p.vllm) == (old, new)]
        pinned = [replace(v, vllm=old) for v in paired_baseline(baseline, mine)]
        diffs.append(compare_releases(pinned + [c for c in current if c.vllm == new], old, new))
    return diffs
