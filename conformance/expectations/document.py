"""The generated findings document, docs/findings.md: every known finding, written out in full.

`conformance known` prints it and `conformance known --write` writes it; a test keeps the
committed file equal to what `findings_markdown()` renders from findings.toml.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path

from conformance.core import baseline
from conformance.core.baseline import BASELINE, ENGINE_CHECKS
from conformance.core.signatures import difference_kind
from conformance.core.vllms import release
from conformance.expectations import ANY, SIDES, UPSTREAM, Finding, load
from conformance.paths import ROOT
from impl.version import bounds, in_range, matches, parse_version

DOCUMENT = ROOT / "docs" / "findings.md"
WIDTH = 100

def measured_vllms() -> dict[str, tuple[str, ...]]:
    """The releases every finding was measured on, with the transformers versions of their
    matrix: the baseline's (core/baseline.py). A finding a release fixed has a vLLM bound that
    excludes it."""
    return baseline.measured()


INTRO = """\
Disagreements found between vLLM's Transformers backend (or `impl`, which reproduces it) and
native vLLM / the HF processor. Each is recorded once in `conformance/expectations/findings.toml`
with the evidence a failure must show to count as this finding (each evidence string quotes what
names the cause: a token or id, a field, a value, the subject's or processor's own message; never
the harness's wording alone): such a cell is `xfail` and names the finding, a cell it applies to
that passes (a suite cell having compared at least its floor of cases) is `xpass` (the finding is
stale), and any other difference in the same cell makes it a `fail`. A finding for every fixture
or check (`*`) has an upper transformers bound or says why the whole cell is meaningless; every
finding bounds transformers and vLLM from above or says why an axis stays open. Comparisons are
never loosened.

The vLLM columns say which release shows each finding: `yes` (on the transformers versions its
matrix ran), `fixed` (the finding's upper vLLM bound excludes that release: its matrix no longer
shows it), `no` (below the finding's lower vLLM bound), `n/a` (all the finding's transformers
versions lie below the release's window, which it cannot run) or `not measured` (none of the
versions its matrix ran is in the finding's range)."""


def _code(text: str) -> str:
    """A Markdown code span that survives backticks inside the text."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def inline_markdown(text: str) -> str:
    # reasons quote tokens such as <start_of_image>: outside a code span a bare `<` would be
    # read as an HTML tag and vanish from the rendered page
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("<", "\\<") for i, p in enumerate(parts))


def _wrapped(text: str) -> str:
    # short lines keep the committed file readable as text and its diffs small
    return textwrap.fill(text, width=WIDTH, break_long_words=False, break_on_hyphens=False)


def _names(values: tuple[str, ...], every: str = "any") -> str:
    return every if not values or ANY in values else ", ".join(values)


def _options(finding: Finding) -> str:
    if not finding.options:
        return "none (the default options too)"
    return ", ".join(name.replace("@", " on ") for name in finding.options)


def shown_on(finding: Finding, vllm: str) -> str:
    """Whether release `vllm` shows the finding: yes, fixed (its vLLM bound), n/a (every
    transformers version of the finding is below the release's window), not measured."""
    if not matches(vllm, finding.vllm):
        _, fixed_in = bounds(finding.vllm)
        return "fixed" if fixed_in and not in_range(vllm, None, fixed_in) else "no"
    engine_only = vllm in baseline.engines_not_run() and ANY not in finding.checks and all(
        check in ENGINE_CHECKS for check in finding.checks)
    if not engine_only and any(matches(version, finding.versions)
                               for version in measured_vllms()[vllm]):
        return "yes"
    _, upper = bounds(finding.versions)
    low = release(vllm).window[0]  # from the release's metadata (None: unknown here)
    if upper is not None and low is not None and not in_range(low, None, upper):
        return "n/a"
    return "not measured"


def _shown(finding: Finding) -> str:
    return ", ".join(f"{vllm} {shown_on(finding, vllm)}" for vllm in measured_vllms())


def observed_cells(path: Path = BASELINE) -> dict[str, list[dict]]:
    """The committed baseline's xfail cells by finding id (none without a baseline)."""
    by_finding: dict[str, list[dict]] = defaultdict(list)
    for cell in baseline.cells(path):
        if cell["status"] == "xfail" and cell.get("finding"):
            by_finding[cell["finding"]].append(cell)
    return by_finding


def _upstream(finding: Finding) -> str:
    # "huggingface/transformers#47588": how GitHub refers to an issue or a pull request
    found = [UPSTREAM.fullmatch(link) for link in finding.upstream]
    return ", ".join(f"[{m[1]}#{m[3]}]({m[0]})" for m in found if m) or "none known"


def _confirmed_by(finding: Finding) -> str:
    # linked from docs/, where this document lives
    return ", ".join(f"[`{script}`](../{script})" for script in finding.confirmed_by) or \
        "no standalone script: the harness's cells below"


def _observed(cells: list[dict]) -> list[str]:
    """Per transformers version its cells, and each signature observed (the check and the
    evidence's wording without its values) with its first evidence, as the baseline has them."""

    if not cells:
        return ["Observed: no cell of the committed baseline shows it (its versions or vLLM "
                "lie outside the default matrix).", ""]
    lines = ["Observed in the committed baseline (`reports/baseline.json`, vLLM "
             f"{', '.join(sorted({c['vllm'] for c in cells}))}):", ""]
    by_version: dict[str, list[dict]] = defaultdict(list)
    for cell in cells:
        by_version[cell["version"]].append(cell)
    signatures: dict[str, tuple[list[str], str]] = {}
    for version in sorted(by_version, key=parse_version):
        group = by_version[version]
        where = sorted({f"{c['fixture']}/{c['check']}" for c in group})
        lines.append(f"- {version}: {len(group)} cell(s): {', '.join(where)}")
        for cell in group:
            evidence = baseline.shown_evidence(cell)
            versions, _ = signatures.setdefault(difference_kind(cell["check"], evidence),
                                                ([], " ".join(evidence.split())[:200]))
            if version not in versions:
                versions.append(version)
    lines += ["", "Signatures observed (the first evidence of each):", ""]
    lines += [f"- {_code(sig)} on {', '.join(versions)}: {_code(example)}"
              for sig, (versions, example) in signatures.items()]
    return lines + [""]


def _open(finding: Finding, axis: str) -> list[str]:
    """Why the axis has no upper bound, as a sub-item under its line (none where it has one)."""
    why = finding.open.get(axis)
    if not why:
        return []
    return [textwrap.fill(f"- no upper bound: {inline_markdown(why)}", width=WIDTH,
                          initial_indent="  ", subsequent_indent="    ",
                          break_long_words=False, break_on_hyphens=False)]


def _section(finding: Finding, observed: list[dict] | None = None) -> list[str]:
    lines = [f'<a id="{finding.id}"></a>', "", f"## {finding.id}", "", f"**{finding.title}**", "",
             f"- transformers: {finding.describe_versions()}",
             *_open(finding, "versions"),
             f"- vLLM: {finding.describe_versions(finding.vllm)} (shown by vLLM "
             f"{_shown(finding)})",
             *_open(finding, "vllm"),
             f"- fixtures: {_names(finding.fixtures)}",
             f"- checks: {_names(finding.checks)}",
             f"- subjects: {_names(finding.subjects)}",
             f"- processor options: {_options(finding)}",
             f"- deviates from transformers: {SIDES[finding.side]}",
             f"- upstream: {_upstream(finding)}",
             f"- confirmed by: {_confirmed_by(finding)}",
             *(["- drift it explains: " + ", ".join(
                 f"{'any check' if c == ANY else c} <= {b:g}" for c, b in finding.drift.items())]
               if finding.drift else []),
             *(["- explains an error of the cell (set-up, the check raised)"]
               if finding.explains_error else []), "",
             _wrapped(inline_markdown(finding.reason)), "",
             *([_wrapped(inline_markdown("Whole cell: " + finding.whole_cell)), ""]
               if finding.whole_cell else []),
             "Evidence (the failure observed must contain one of these):", ""]
    for check, texts in finding.evidence.items():
        where = "any check" if check == ANY else f"`{check}`"
        # one string a line: each is an exact substring, which wrapping would break
        lines += [f"- {where}:"] + [f"  - {_code(text)}" for text in texts]
    return lines + [""] + _observed(observed or [])


def findings_markdown(findings: tuple[Finding, ...] | None = None) -> str:
    """The whole document: an index table, then one section per finding (findings.toml order)."""
    findings = load() if findings is None else findings
    lines = ["# Known findings", "",
             "<!-- generated from conformance/expectations/findings.toml by "
             "`conformance known --write`; do not edit by hand -->", "", INTRO, "",
             "| finding | title | transformers | vLLM | "
             + " | ".join(f"vLLM {v}" for v in measured_vllms()) + " | fixtures | checks |",
             "|---|---|---|---|" + "---|" * len(measured_vllms()) + "---|---|"]
    for f in findings:
        title = inline_markdown(f.title).replace("|", "\\|")
        lines.append(f"| [{f.id}](#{f.id}) | {title} | {f.describe_versions()} | "
                     f"{f.describe_versions(f.vllm)} | "
                     + "".join(f"{shown_on(f, v)} | " for v in measured_vllms())
                     + f"{_names(f.fixtures)} | "
                     f"{_names(f.checks)} |")
    lines.append("")
    observed = observed_cells()
    for finding in findings:
        lines += _section(finding, observed.get(finding.id, []))
    return "\n".join(lines).rstrip("\n") + "\n"
