"""report.md (also the GitHub step summary): the architecture x version matrix, the known
findings with the cells each covers, which references the model checks' cells agree with, and
the details of every cell that is not a plain pass."""

from __future__ import annotations

from collections import Counter

from conformance.core.vllms import impl_follows
from conformance.expectations.document import inline_markdown
from conformance.results.agreement import markdown_section as agreement_section
from conformance.results.cells import (
    anchor,
    cells_text,
    counts_text,
    legend,
    one_line,
    short_label,
)
from conformance.results.known import KnownGroup, observed
from conformance.results.releases import markdown_sections
from conformance.results.verdict import STATUSES, Verdict, owner_line
from conformance.results.view import View, as_view


def finding_anchor(finding_id: str) -> str:
    return "finding-" + finding_id.replace(".", "-")


def markdown(verdicts: list[Verdict] | View, meta: dict | None = None) -> str:
    view = as_view(verdicts)
    lines = _matrix(view)
    totals = Counter(v.status for v in view.verdicts)
    lines += ["", "Totals: " + ", ".join(f"{s} {totals[s]}" for s in STATUSES if totals[s]), ""]
    if meta and meta.get("seconds") is not None:
        lines += [f"Run time {meta['seconds']:.0f} s on {len(view.verdicts)} cells.", ""]
    # which of vLLM's CPU kernel builds each vLLM's engines ran on (vLLM picks it by the CPU)
    for label, kernels in sorted((meta or {}).get("kernels", {}).items()):
        lines += [f"vLLM {label}: {kernels}.", ""]
    # a version run without a requirement it states (`run --allow-unmet`): said under the totals
    for version, unmet in sorted((meta or {}).get("unmet_requirements", {}).items()):
        lines += [f"**transformers {version} ran without {', '.join(unmet)}** "
                  "(`--allow-unmet`: the package index could not meet it; docs/versions.md).", ""]
    # a run over several vLLMs: what moved between them
    lines += markdown_sections(view.verdicts, view.vllms)
    lines += _known_findings(*view.known)
    lines += agreement_section(view.relations, view.columns)
    lines += _details(view)
    return "\n".join(lines) + "\n"


def _matrix(view: View) -> list[str]:
    versions, grid, note = view.columns, view.grid, view.note
    lines = ["# vLLM Transformers-backend conformance" + (f" ({note})" if note else ""), "",
             f"Cells per architecture and transformers version ({legend()}); `impl` is the "
             f"reference of the backend ({impl_follows(view.vllms)}).", "",
             "| architecture | " + " | ".join(versions) + " |",
             "|---|" + "---|" * len(versions)]
    for fixture in view.fixtures:
        row = []
        for version in versions:
            cell = grid.get((fixture, version), [])
            text = counts_text([v.status for v in cell]) if cell else ""
            if any(v.status not in ("pass", "n/a") for v in cell):
                text = f"[{text}](#{anchor(fixture, version)})"
            row.append(text)
        lines.append(f"| {fixture} | " + " | ".join(row) + " |")
    return lines


def _known_findings(groups: list[KnownGroup], unnamed: list[Verdict]) -> list[str]:
    if not groups and not unnamed:
        return []
    count = sum(len(g.cells) for g in groups)
    lines = ["## Known findings", "",
             f"{cells_text(count)} fail as {len(groups)} known finding(s) describe (`xfail`); "
             "the repository's `docs/findings.md` writes each finding out in full.", ""]
    for group in groups:
        lines += [f'- <a id="{finding_anchor(group.finding)}"></a>**{group.finding}** '
                  f"({cells_text(len(group.cells))}): {inline_markdown(group.title)}",
                  "  - " + ", ".join(short_label(v) for v in group.cells)]
    if unnamed:
        lines.append(f"- {cells_text(len(unnamed))} `xfail` without a finding id (recorded "
                     "before verdicts named one): their reasons are under Details.")
    return lines + [""]


def _details(view: View) -> list[str]:
    """Every bad cell in full; a known failure in one line that points at its finding."""
    shown = {place: [v for v in cells if v.status not in ("pass", "n/a")]
             for place, cells in view.grid.items()}
    if not any(shown.values()):
        return []
    lines = ["## Details", ""]
    for (fixture, version), group in ((p, g) for p, g in shown.items() if g):
        lines += [f'<a id="{anchor(fixture, version)}"></a>',
                  f"### {fixture} on transformers {version}", ""]
        for v in group:
            head = f"- **{v.subject} / {v.check}: {v.status}**"
            if v.status == "xfail" and v.finding:
                lines.append(f"{head}: [{v.finding}](#{finding_anchor(v.finding)}) "
                             f"{one_line(observed(v))}")
                continue
            repro = f" Reproducer: `{v.data['reproducer']}`." if v.data.get("reproducer") else ""
            log = f" Log: `{v.log}`." if v.log else ""  # its whole error text and output
            owner = f" ({owner})" if (owner := owner_line(v)) else ""
            lines.append(f"{head}{owner}: {one_line(v.detail, 700)}{repro}{log}")
        lines.append("")
    return lines
