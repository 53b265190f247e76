"""Gate a run against the committed baseline: regressions fail; fixes and known failures listed
(the known ones by the finding that explains them).

A cell known (xfail) in both runs is looked into, not waved through: another finding, a
difference the baseline's cell did not show, or a shared difference drifting further than the
baseline's fail the gate, as a cell that passed and is known now does unless accepted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from conformance.core.signatures import magnitude, signature
from conformance.results.cells import cells_text, one_line
from conformance.results.known import group_known, title_of, wrapped_labels
from conformance.results.verdict import BAD, CellKey, Verdict

GOOD = frozenset({"pass"})
CUT = 300  # the judge keeps each of data["differences"] to its first 300 characters
DRIFT = 1.1  # a shared difference may drift 10% beyond the baseline's: fp noise, not news
OBSERVED = "[observed: "
# what the judge appends to an xfail's detail after the evidence's closing bracket
_MORE = re.compile(r" \(\+\d+ other distinct failure\(s\)\)$")


def observed(detail: str) -> str:
    """The evidence inside a detail's `[observed: ...]` (the detail itself without one). The
    evidence may hold brackets: it ends at the last `]` followed by nothing but the options."""
    _, found, rest = detail.partition(OBSERVED)
    if not found:
        return detail
    rest = _MORE.sub("", rest)
    for end in (i for i in range(len(rest) - 1, -1, -1) if rest[i] == "]"):
        tail = rest[end + 1:]
        if not tail or (tail.startswith(" (with ") and tail.endswith(")")):
            return rest[:end]
    return rest


def evidences(verdict: Verdict) -> list[str]:
    """Every difference a cell recorded: data["differences"] where the judge kept them, else
    (a single failure, or a result recorded before it kept them) the one in its detail, cut
    as the judge cuts a kept one so that the two compare alike."""
    kept = verdict.data.get("differences")
    if kept:
        return [str(evidence) for evidence in kept]
    return [observed(verdict.detail)[:CUT]]


@dataclass(frozen=True)
class Difference:
    signature: str
    drift: float | None
    cut: bool  # the evidence filled the judge's cut: its end, and so its signature's, is lost

    @classmethod
    def of(cls, evidence: str) -> Difference:
        return cls(signature(evidence), magnitude(evidence), len(evidence) >= CUT)

    @property
    def stem(self) -> str:
        # a cut falls after as many characters as the measured values took: drop the token
        # it may have split, and compare what is left as a prefix
        return self.signature.rsplit(" ", 1)[0] if self.cut else self.signature

    def same(self, other: Difference) -> bool:
        if not (self.cut or other.cut):
            return self.signature == other.signature
        return ((self.cut and other.stem.startswith(self.stem))
                or (other.cut and self.stem.startswith(other.stem)))


def differences(verdict: Verdict) -> list[Difference]:
    return [Difference.of(evidence) for evidence in evidences(verdict)]


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
    for difference, evidence in zip(after, evidences(now), strict=True):
        shared = [d for d in before if d.same(difference)]
        if not shared:
            reasons.append(f"a new difference: {one_line(evidence)}")
            continue
        drifts = [d.drift for d in shared if d.drift is not None]
        if difference.drift is not None and drifts and larger(difference.drift, max(drifts)):
            reasons.append(f"a larger drift: {difference.drift:.3g} (was {max(drifts):.3g}): "
                           f"{one_line(evidence)}")
    narrowed = any(not any(d.same(a) for a in after) for d in before)
    return list(dict.fromkeys(reasons)), narrowed


@dataclass
class KnownChange:
    was: Verdict
    now: Verdict
    reasons: list[str]  # another finding, a new difference, a larger drift


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
    in_both: int = 0
    only_now: int = 0
    only_baseline: int = 0
    known_compared: int = 0  # xfail in both runs: their findings and signatures compared

    @property
    def ok(self) -> bool:
        return not (self.regressions or self.new_failures or self.known_now_bad
                    or self.known_changed or self.newly_known)


def compare(baseline: list[Verdict], current: list[Verdict],
            compare_missing: bool = False, baseline_version: str | None = None,
            baseline_vllm: str | None = None,
            accept: frozenset[str] = frozenset()) -> GateResult:
    """A regression: a cell that passed in the baseline and is bad now (fail, error, crash,
    timeout, or a stale known failure). Cells only in one of the two are listed, not judged,
    except new cells that are bad. A cell known in both fails the gate when another finding
    explains it, or it shows a difference the baseline's did not or a larger drift; a cell
    that passed and is known now fails it unless `accept` holds its finding (or "*").
    With `baseline_version`, every current cell is compared with the baseline's cell on that
    version (gating a candidate release against the pin); with `baseline_vllm`, with the
    baseline's cell of that vLLM (what moved between releases)."""
    if baseline_vllm is not None:
        pinned = [v for v in baseline if v.vllm == baseline_vllm]
        baseline = [Verdict(**{**v.__dict__, "vllm": vllm})
                    for vllm in {c.vllm for c in current} for v in pinned]
    if baseline_version is not None:
        pinned = [v for v in baseline if v.version == baseline_version]
        baseline = [Verdict(**{**v.__dict__, "version": version})
                    for version in {c.version for c in current} for v in pinned]
    before: dict[CellKey, Verdict] = {v.key: v for v in baseline}
    now: dict[CellKey, Verdict] = {v.key: v for v in current}
    result = GateResult()
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


def render(result: GateResult) -> str:
    compared = result.in_both + result.only_now + result.only_baseline
    lines = [f"compared {cells_text(compared)} ({result.in_both} in both runs; "
             f"{result.only_now} only now, {result.only_baseline} only in the baseline); "
             f"xfail in both: {result.known_compared}, findings and signatures compared"]
    if result.regressions:
        lines.append(f"REGRESSIONS ({len(result.regressions)}): passed in the baseline, bad now")
        lines += [f"  {now.status}: {now.key.label()}: {one_line(now.detail)}"
                  for _, now in result.regressions]
    if result.new_failures:
        lines.append(f"FAILING, NOT IN THE BASELINE AS PASSING ({len(result.new_failures)})")
        lines += [f"  {v.status}: {v.key.label()}: {one_line(v.detail)}"
                  for v in result.new_failures]
    if result.known_now_bad:
        lines.append(f"KNOWN IN THE BASELINE, BAD NOW ({len(result.known_now_bad)}): another "
                     "difference, or the finding no longer shows (xpass)")
        lines += [f"  {now.status}: {now.key.label()}: {one_line(now.detail)}"
                  for _, now in result.known_now_bad]
    if result.known_changed:
        lines.append(f"KNOWN IN BOTH, CHANGED ({len(result.known_changed)}): another finding, "
                     "a new difference, or a drift over 10% beyond the baseline's")
        for change in result.known_changed:
            lines.append(f"  {change.now.key.label()}: {change.now.finding}")
            lines += [f"    {reason}" for reason in change.reasons]
    if result.newly_known:
        lines += _newly_known_lines(result.newly_known, "NEWLY KNOWN", ", not accepted "
                                    "(--accept FINDING, or '*')")
    if result.still_failing:
        lines.append(f"STILL FAILING, AS IN THE BASELINE ({len(result.still_failing)})")
        lines += [f"  {v.status}: {v.key.label()}" for v in result.still_failing]
    if result.fixed:
        lines.append(f"FIXED ({len(result.fixed)}): failed in the baseline, pass now")
        lines += [f"  was {was.status}: {now.key.label()}" for was, now in result.fixed]
    if result.accepted:
        lines += _newly_known_lines(result.accepted, "NEWLY KNOWN, accepted", "")
    if result.narrowed:
        lines.append(f"NARROWED ({len(result.narrowed)}): known in both, fewer differences now")
        lines += [f"  {now.key.label()}: {now.finding}" for _, now in result.narrowed]
    if result.known:
        lines += _known_lines(result.known)
    if result.missing:
        lines.append(f"NOT RUN NOW ({len(result.missing)})")
        lines += [f"  {v.key.label()}" for v in result.missing]
    lines.append("gate: " + ("PASS" if result.ok else "FAIL"))
    return "\n".join(lines)


def _newly_known_lines(pairs: list[tuple[Verdict, Verdict]], title: str,
                       note: str) -> list[str]:
    lines = [f"{title} ({len(pairs)}): passed in the baseline, a known failure now{note}"]
    return lines + [f"  {now.key.label()}: " + (f"{now.finding}: {title_of(now.finding)}"
                                                  if now.finding else one_line(now.detail))
                    for _, now in pairs]


def _known_lines(known: list[Verdict]) -> list[str]:
    """One line per finding and the cells it covers; cells without a finding id (results
    recorded before verdicts named one) one by one, as they always were."""
    groups, unnamed = group_known(known)
    lines = [f"KNOWN FAILURES ({len(known)})"
             + (f", by the {len(groups)} finding(s) that explain them" if groups else "")]
    for group in groups:
        lines.append(f"  {group.finding} ({cells_text(len(group.cells))}): {group.title}")
        lines += wrapped_labels(group.cells)
    if unnamed and groups:
        lines.append(f"  without a finding id ({cells_text(len(unnamed))})")
    indent = "    " if groups else "  "
    lines += [f"{indent}{v.key.label()}: {one_line(v.detail)}" for v in unnamed]
    return lines
