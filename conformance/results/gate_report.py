"""What a gate's comparison (`gate.GateResult`) says: `render` lists every cell; `summary`
groups them (by finding, and bad cells by what their difference says with its values masked:
`signatures.wording`) to fit a screen; `as_json` is the machine-readable verdict;
`release_lines` what changed between the run's vLLM and the baseline's."""

from __future__ import annotations

from collections.abc import Callable

from conformance.core.signatures import wording
from conformance.results.cells import cells_text, one_line, short_label
from conformance.results.gate import GateResult, differences, outside_bounds
from conformance.results.known import group_known, title_of, wrapped_labels
from conformance.results.releases import ReleaseDiff, render_lines
from conformance.results.verdict import Verdict

SECTIONS = {  # each list of a GateResult and its heading ({n}: how many)
    "regressions": "REGRESSIONS ({n}): passed in the baseline, bad now",
    "new_failures": "FAILING, NOT IN THE BASELINE AS PASSING ({n})",
    "known_now_bad": "KNOWN IN THE BASELINE, BAD NOW ({n}): another difference, or the finding "
                     "no longer shows (xpass)",
    "known_changed": "KNOWN IN BOTH, CHANGED ({n}): another finding, a new difference, or a "
                     "drift over 10% beyond the baseline's",
    "newly_known": "NEWLY KNOWN ({n}): passed in the baseline, a known failure now, not "
                   "accepted (--accept FINDING, or '*')",
    "still_failing": "STILL FAILING, AS IN THE BASELINE ({n})",
    "fixed": "FIXED ({n}): failed in the baseline, pass now",
    "accepted": "NEWLY KNOWN, accepted ({n}): passed in the baseline, a known failure now",
    "narrowed": "NARROWED ({n}): known in both, fewer differences now",
    "missing": "NOT RUN NOW ({n})",
}
EXAMPLES = 3  # cell labels a summary shows per group
VERDICT_LINE = {"pass": "gate: PASS", "fail": "gate: FAIL",
                "nothing-compared": "gate: NO VERDICT (compared no cell)"}


def _heading(section: str, count: int) -> str:
    return SECTIONS[section].format(n=count)


def _head(result: GateResult) -> list[str]:
    """How many cells were compared, and with which columns of the baseline."""
    lines = [f"compared {cells_text(result.in_both)} with the baseline ({result.only_now} only "
             f"in this run, {result.only_baseline} only in the baseline: not compared); xfail "
             f"in both: {result.known_compared}, findings and signatures compared"]
    return lines + list(dict.fromkeys(p.text() for p in result.pairs if p.moved))


def _bad_line(v: Verdict) -> str:
    return f"{v.status}: {v.key.label()}: {one_line(v.detail)}"


def _known_bad_line(pair: tuple[Verdict, Verdict]) -> str:
    hint = outside_bounds(*pair)
    return _bad_line(pair[1]) + (f" [{hint}]" if hint else "")


def _newly_known_line(now: Verdict) -> str:
    return f"{now.key.label()}: " + (f"{now.finding}: {title_of(now.finding)}"
                                      if now.finding else one_line(now.detail))


def render(result: GateResult) -> str:
    """Every cell the gate has something to say about, one line each (`--details`)."""
    lines = _head(result)
    if result.regressions:
        lines.append(_heading("regressions", len(result.regressions)))
        lines += [f"  {_bad_line(now)}" for _, now in result.regressions]
    if result.new_failures:
        lines.append(_heading("new_failures", len(result.new_failures)))
        lines += [f"  {_bad_line(v)}" for v in result.new_failures]
    if result.known_now_bad:
        lines.append(_heading("known_now_bad", len(result.known_now_bad)))
        lines += [f"  {_known_bad_line(pair)}" for pair in result.known_now_bad]
    if result.known_changed:
        lines.append(_heading("known_changed", len(result.known_changed)))
        for change in result.known_changed:
            lines.append(f"  {change.now.key.label()}: {change.now.finding}")
            lines += [f"    {reason}" for reason in change.reasons]
    if result.newly_known:
        lines.append(_heading("newly_known", len(result.newly_known)))
        lines += [f"  {_newly_known_line(now)}" for _, now in result.newly_known]
    if result.still_failing:
        lines.append(_heading("still_failing", len(result.still_failing)))
        lines += [f"  {v.status}: {v.key.label()}" for v in result.still_failing]
    if result.fixed:
        lines.append(_heading("fixed", len(result.fixed)))
        lines += [f"  was {was.status}: {now.key.label()}" for was, now in result.fixed]
    if result.accepted:
        lines.append(_heading("accepted", len(result.accepted)))
        lines += [f"  {_newly_known_line(now)}" for _, now in result.accepted]
    if result.narrowed:
        lines.append(_heading("narrowed", len(result.narrowed)))
        lines += [f"  {now.key.label()}: {now.finding}" for _, now in result.narrowed]
    if result.known:
        lines += _known_lines(result.known)
    if result.missing:
        lines.append(_heading("missing", len(result.missing)))
        lines += [f"  {v.key.label()}" for v in result.missing]
    lines.append(VERDICT_LINE[result.status])
    return "\n".join(lines)


def first_wording(v: Verdict) -> str:
    """What a cell's first difference says, its values masked: cells failing alike (one
    cause across fixtures, checks and versions) share it."""
    return differences(v)[0].wording or "(no detail)"


def _bad_group(v: Verdict) -> str:
    # a cell a finding still names (stale, or bad beside it) by the finding
    return f"{v.status}: {v.finding}" if v.finding else f"{v.status}: {first_wording(v)}"


def _groups(items: list, key: Callable) -> list[tuple[str, list]]:
    """Items by group, the largest group first (equal ones in the order first seen)."""
    found: dict[str, list] = {}
    for item in items:
        found.setdefault(key(item), []).append(item)
    return sorted(found.items(), key=lambda group: -len(group[1]))


def examples(cells: list[Verdict]) -> str:
    shown = ", ".join(short_label(v) for v in cells[:EXAMPLES])
    return shown + (f" (+{len(cells) - EXAMPLES} more)" if len(cells) > EXAMPLES else "")


def _now(pair: tuple[Verdict, Verdict]) -> Verdict:
    return pair[1]


def _grouped_lines(items: list, key: Callable, cell: Callable[..., Verdict],
                   alone: Callable[..., str]) -> list[str]:
    """A group of one: its cell's own line; a larger one: its name, count and examples."""
    lines = []
    for name, members in _groups(items, key):
        if len(members) == 1:
            lines.append(f"  {alone(members[0])}")
        else:
            lines += [f"  {name} ({cells_text(len(members))})",
                      f"    e.g. {examples([cell(m) for m in members])}"]
    return lines


def summary(result: GateResult) -> str:
    """The gate's verdict on a screen: each section's cells grouped by finding, bad cells by
    what their difference says (`first_wording`), a count and a few labels per group."""
    lines = _head(result)
    if result.regressions:
        lines.append(_heading("regressions", len(result.regressions)))
        lines += _grouped_lines(result.regressions, lambda p: _bad_group(p[1]), _now,
                                lambda p: _bad_line(p[1]))
    if result.known_now_bad:
        lines.append(_heading("known_now_bad", len(result.known_now_bad)))
        lines += _grouped_lines(result.known_now_bad,
                                lambda p: outside_bounds(*p) or _bad_group(p[1]), _now,
                                _known_bad_line)
    if result.new_failures:
        lines.append(_heading("new_failures", len(result.new_failures)))
        lines += _grouped_lines(result.new_failures, _bad_group, lambda v: v, _bad_line)
    if result.known_changed:
        lines.append(_heading("known_changed", len(result.known_changed)))
        lines += _grouped_lines(
            result.known_changed, lambda c: f"{c.now.finding}: {wording(c.reasons[0])}",
            lambda c: c.now, lambda c: f"{c.now.key.label()}: {c.now.finding}: {c.reasons[0]}")
    for section, pairs in (("newly_known", result.newly_known), ("accepted", result.accepted)):
        if pairs:
            lines.append(_heading(section, len(pairs)))
            lines += _grouped_lines(
                pairs, lambda p: (f"{p[1].finding}: {title_of(p[1].finding)}" if p[1].finding
                                  else first_wording(p[1])),
                _now, lambda p: _newly_known_line(p[1]))
    if result.still_failing:
        lines.append(_heading("still_failing", len(result.still_failing)))
        lines += _grouped_lines(result.still_failing, _bad_group, lambda v: v,
                                lambda v: f"{v.status}: {v.key.label()}")
    if result.fixed:
        lines.append(_heading("fixed", len(result.fixed)))
        lines += _grouped_lines(
            result.fixed, lambda p: f"was {_bad_group(p[0])}", _now,
            lambda p: f"was {p[0].status}: {p[1].key.label()}")
    if result.narrowed:
        lines.append(_heading("narrowed", len(result.narrowed)))
        lines += _grouped_lines(result.narrowed, lambda p: p[1].finding, _now,
                                lambda p: f"{p[1].key.label()}: {p[1].finding}")
    if result.known:
        groups, unnamed = group_known(result.known)
        lines.append(f"KNOWN FAILURES ({len(result.known)})"
                     + (f", by the {len(groups)} finding(s) that explain them" if groups else ""))
        lines += [f"  {g.finding} ({cells_text(len(g.cells))}): {g.title}" for g in groups]
        lines += _grouped_lines(unnamed, lambda v: f"without a finding id: {first_wording(v)}",
                                lambda v: v, lambda v: f"{v.key.label()}: {one_line(v.detail)}")
    if result.missing:
        lines.append(_heading("missing", len(result.missing)))
    if lines != render(result).splitlines()[:-1]:  # something was grouped or left out
        lines.append("(every cell: --details)")
    lines.append(VERDICT_LINE[result.status])
    return "\n".join(lines)


def release_lines(diffs: list[ReleaseDiff], details: bool) -> list[str]:
    """What moved between each pair of vLLM releases compared; the moved cells themselves
    (each also in the gate's own sections) only with `details`."""
    lines = []
    for diff in diffs:
        section = render_lines(diff)
        moved = next((i for i, line in enumerate(section) if line.startswith("Cells moved")),
                     None)
        if moved is not None and not details:
            section = section[:moved + 1]
            section[-1] = section[-1].rstrip(":") + " (--details lists them)"
        lines += section
    return lines


def _key(v: Verdict) -> dict:
    return {"fixture": v.fixture, "subject": v.subject, "check": v.check,
            "version": v.version, "vllm": v.vllm}


def _outcome(v: Verdict) -> dict:
    return {"status": v.status, "finding": v.finding, "detail": v.detail}


def as_json(result: GateResult, diffs: list[ReleaseDiff] | None = None) -> dict:
    """The verdict for machines: status (pass, fail, nothing-compared), counts, the baseline
    column each run column was compared with, and every cell of each section with its key,
    statuses and details (`was`: the baseline's cell, in the paired column)."""
    paired = {(p.vllm, p.version): p for p in result.pairs}

    def was(v: Verdict) -> dict:
        pair = paired.get((v.vllm, v.version))
        column = ({"version": pair.baseline_version, "vllm": pair.baseline_vllm} if pair
                  else {"version": v.version, "vllm": v.vllm})
        return {**column, **_outcome(v)}

    def pairs(items: list[tuple[Verdict, Verdict]]) -> list[dict]:
        return [{"cell": _key(now), "was": was(before), "now": _outcome(now)}
                for before, now in items]

    def cells(items: list[Verdict]) -> list[dict]:
        return [{"cell": _key(v), "now": _outcome(v)} for v in items]

    groups, unnamed = group_known(result.known)
    return {
        "status": result.status, "exit_code": result.exit_code,
        "compared": result.in_both, "only_in_run": result.only_now,
        "only_in_baseline": result.only_baseline, "known_compared": result.known_compared,
        "baseline_columns": [{"vllm": p.vllm, "version": p.version,
                              "baseline_vllm": p.baseline_vllm,
                              "baseline_version": p.baseline_version,
                              "vllm_rule": p.how_vllm, "version_rule": p.how_version}
                             for p in result.pairs],
        "regressions": pairs(result.regressions), "improvements": pairs(result.fixed),
        "new_failures": cells(result.new_failures),
        "known_now_bad": pairs(result.known_now_bad),
        "known_changed": [{"cell": _key(c.now), "was": was(c.was), "now": _outcome(c.now),
                           "reasons": c.reasons} for c in result.known_changed],
        "newly_known": pairs(result.newly_known), "accepted": pairs(result.accepted),
        "narrowed": pairs(result.narrowed), "still_failing": cells(result.still_failing),
        "known": [{"finding": g.finding, "title": g.title, "cells": [_key(v) for v in g.cells]}
                  for g in groups] + ([{"finding": "", "title": "without a finding id",
                                        "cells": [_key(v) for v in unnamed]}] if unnamed else []),
        "missing": [_key(v) for v in result.missing],
        "releases": [{"old": d.old, "new": d.new, "compared": d.compared,
                      "fixed": sorted(d.fixed), "new_findings": sorted(d.new_findings),
                      "moved": [{"cell": _key(now), "was": _outcome(before),
                                 "now": _outcome(now)} for before, now in d.moved]}
                     for d in diffs or ()],
    }


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
