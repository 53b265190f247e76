"""Gate a run against the committed baseline: regressions fail; fixes and known failures listed
(the known ones by the finding that explains them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance.results.cells import cells_text, one_line
from conformance.results.known import group_known, title_of, wrapped_labels
from conformance.results.verdict import BAD, CellKey, Verdict

GOOD = frozenset({"pass"})


@dataclass
class GateResult:
    regressions: list[tuple[Verdict, Verdict]] = field(default_factory=list)  # (was, now)
    fixed: list[tuple[Verdict, Verdict]] = field(default_factory=list)
    known: list[Verdict] = field(default_factory=list)  # xfail now, with their reasons
    newly_known: list[tuple[Verdict, Verdict]] = field(default_factory=list)  # pass -> xfail
    new_failures: list[Verdict] = field(default_factory=list)  # bad now, absent from baseline
    # a known failure in the baseline that is bad now: another difference beside the known one,
    # or the finding no longer shows (xpass: stale, e.g. fixed by the vLLM under test)
    known_now_bad: list[tuple[Verdict, Verdict]] = field(default_factory=list)
    still_failing: list[Verdict] = field(default_factory=list)  # bad in both (accepted then)
    missing: list[Verdict] = field(default_factory=list)  # in the baseline, not run now

    @property
    def ok(self) -> bool:
        return not self.regressions and not self.new_failures and not self.known_now_bad


def compare(baseline: list[Verdict], current: list[Verdict],
            compare_missing: bool = False, baseline_version: str | None = None,
            baseline_vllm: str | None = None) -> GateResult:
    """A regression: a cell that passed in the baseline and is bad now (fail, error, crash,
    timeout, or a stale known failure). Cells only in one of the two are listed, not judged,
    except new cells that are bad. With `baseline_version`, every current cell is compared
    with the baseline's cell on that version (gating a candidate release against the pin);
    with `baseline_vllm`, with the baseline's cell of that vLLM (what moved between releases)."""
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
            # not a failure of the gate (a finding explains it), but news to a reviewer
            result.newly_known.append((was, verdict))
        elif was.status not in GOOD and was.status != "n/a" and verdict.status in GOOD:
            result.fixed.append((was, verdict))
        elif was.status == "xfail" and verdict.status in BAD:
            result.known_now_bad.append((was, verdict))
        elif was.status in BAD and verdict.status in BAD:
            result.still_failing.append(verdict)
    if compare_missing:
        result.missing = [v for k, v in before.items() if k not in now]
    return result


def render(result: GateResult) -> str:
    lines = []
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
    if result.still_failing:
        lines.append(f"STILL FAILING, AS IN THE BASELINE ({len(result.still_failing)})")
        lines += [f"  {v.status}: {v.key.label()}" for v in result.still_failing]
    if result.fixed:
        lines.append(f"FIXED ({len(result.fixed)}): failed in the baseline, pass now")
        lines += [f"  was {was.status}: {now.key.label()}" for was, now in result.fixed]
    if result.newly_known:
        lines.append(f"NEWLY KNOWN ({len(result.newly_known)}): passed in the baseline, a known "
                     "failure now")
        lines += [f"  {now.key.label()}: " + (f"{now.finding}: {title_of(now.finding)}"
                                               if now.finding else one_line(now.detail))
                  for _, now in result.newly_known]
    if result.known:
        lines += _known_lines(result.known)
    if result.missing:
        lines.append(f"NOT RUN NOW ({len(result.missing)})")
        lines += [f"  {v.key.label()}" for v in result.missing]
    lines.append("gate: " + ("PASS" if result.ok else "FAIL"))
    return "\n".join(lines)


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
