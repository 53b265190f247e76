"""Results on disk and the reports made from them: JSON, Markdown, HTML and JUnit XML.

While a run goes, verdicts are appended to `results.jsonl` (what `--resume` reads back). At the
end `results.json` (schema: reports/README.md) and the three reports are written beside it.
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from pathlib import Path
from xml.etree import ElementTree

from conformance.results.verdict import BAD, STATUSES, Verdict
from impl.version import parse_version

SCHEMA_VERSION = 1
SYMBOLS = {"pass": "✓", "fail": "✗", "xfail": "x", "xpass": "X!", "error": "E", "crash": "C",
           "timeout": "T", "n/a": "–"}


def append(path: Path, verdict: Verdict) -> None:
    with open(path, "a") as stream:
        stream.write(verdict.to_json() + "\n")


def read_partial(path: Path) -> list[Verdict]:
    if not path.exists():
        return []
    return [Verdict.from_json(line) for line in path.read_text().splitlines() if line.strip()]


def read_results(path: Path) -> tuple[list[Verdict], dict]:
    """results.json (or a results.jsonl) -> verdicts and meta."""
    if path.is_dir():
        path = path / "results.json"
    if path.suffix == ".jsonl":
        return read_partial(path), {}
    payload = json.loads(path.read_text())
    if payload.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: results schema {payload.get('schema_version')}, this tool "
                         f"reads {SCHEMA_VERSION}")
    return [Verdict(**cell) for cell in payload["cells"]], payload.get("meta", {})


def latest_per_cell(verdicts: list[Verdict]) -> list[Verdict]:
    """One verdict per cell: the last one recorded (a resumed or merged run may repeat)."""
    return list({v.key: v for v in verdicts}.values())


def write_results(path: Path, verdicts: list[Verdict], meta: dict) -> None:
    payload = {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "summary": dict(sorted(Counter(v.status for v in verdicts).items())),
        "cells": [json.loads(v.to_json()) for v in sort_cells(verdicts)],
    }
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def sort_cells(verdicts: list[Verdict]) -> list[Verdict]:
    return sorted(verdicts, key=lambda v: (v.fixture, parse_version(v.version), v.subject,
                                           v.check))


def versions_of(verdicts: list[Verdict]) -> list[str]:
    return sorted({v.version for v in verdicts}, key=parse_version)


def fixtures_of(verdicts: list[Verdict]) -> list[str]:
    return list(dict.fromkeys(v.fixture for v in verdicts))


def counts_text(statuses: list[str]) -> str:
    counts = Counter(statuses)
    return " ".join(f"{SYMBOLS[s]}{counts[s]}" for s in STATUSES if counts[s])


def anchor(fixture: str, version: str) -> str:
    return f"{fixture}-{version}".replace(".", "-").replace("_", "-")


def write_reports(run_dir: Path, verdicts: list[Verdict], meta: dict) -> None:
    verdicts = sort_cells(latest_per_cell(verdicts))
    write_results(run_dir / "results.json", verdicts, meta)
    (run_dir / "report.md").write_text(markdown(verdicts, meta))
    (run_dir / "report.html").write_text(html_report(verdicts, meta))
    (run_dir / "junit.xml").write_text(junit(verdicts))


def markdown(verdicts: list[Verdict], meta: dict | None = None) -> str:
    versions, grid = versions_of(verdicts), defaultdict(list)
    for v in verdicts:
        grid[(v.fixture, v.version)].append(v)
    legend = ", ".join(f"{sym} {status}" for status, sym in SYMBOLS.items())
    lines = ["# vLLM Transformers-backend conformance", "",
             f"Cells per architecture and transformers version ({legend}).", "",
             "| architecture | " + " | ".join(versions) + " |",
             "|---|" + "---|" * len(versions)]
    for fixture in fixtures_of(verdicts):
        row = []
        for version in versions:
            cell = grid.get((fixture, version), [])
            text = counts_text([v.status for v in cell]) if cell else ""
            if any(v.status not in ("pass", "n/a") for v in cell):
                text = f"[{text}](#{anchor(fixture, version)})"
            row.append(text)
        lines.append(f"| {fixture} | " + " | ".join(row) + " |")
    totals = Counter(v.status for v in verdicts)
    lines += ["", "Totals: " + ", ".join(f"{s} {totals[s]}" for s in STATUSES if totals[s]), ""]
    if meta and meta.get("seconds") is not None:
        lines += [f"Run time {meta['seconds']:.0f} s on {len(verdicts)} cells.", ""]
    details = [v for v in verdicts if v.status not in ("pass", "n/a")]
    if details:
        lines += ["## Details", ""]
        for (fixture, version), group in _group(details).items():
            lines += [f'<a id="{anchor(fixture, version)}"></a>',
                      f"### {fixture} on transformers {version}", ""]
            for v in group:
                text = " ".join(v.detail.split())[:700]
                repro = f" Reproducer: `{v.data['reproducer']}`." if v.data.get("reproducer") \
                    else ""
                lines.append(f"- **{v.subject} / {v.check}: {v.status}**: {text}{repro}")
            lines.append("")
    return "\n".join(lines) + "\n"


def _group(verdicts: list[Verdict]) -> dict[tuple[str, str], list[Verdict]]:
    groups: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for v in verdicts:
        groups[(v.fixture, v.version)].append(v)
    return groups


def junit(verdicts: list[Verdict]) -> str:
    suites = ElementTree.Element("testsuites", name="vllm-mm-conformance")
    for version in versions_of(verdicts):
        cells = [v for v in verdicts if v.version == version]
        counts = Counter(v.status for v in cells)
        suite = ElementTree.SubElement(
            suites, "testsuite", name=f"transformers-{version}", tests=str(len(cells)),
            failures=str(counts["fail"] + counts["xpass"]),
            errors=str(counts["error"] + counts["crash"] + counts["timeout"]),
            skipped=str(counts["xfail"] + counts["n/a"]),
            time=f"{sum(v.seconds for v in cells):.2f}")
        for v in cells:
            case = ElementTree.SubElement(suite, "testcase", classname=f"{v.fixture}.{v.subject}",
                                          name=f"{v.check}[{version}]", time=f"{v.seconds:.2f}")
            if v.status in ("fail", "xpass"):
                ElementTree.SubElement(case, "failure", message=v.detail[:300]).text = v.detail
            elif v.status in ("error", "crash", "timeout"):
                ElementTree.SubElement(case, "error", message=f"{v.status}: {v.detail[:300]}",
                                       type=v.status).text = v.detail
            elif v.status in ("xfail", "n/a"):
                ElementTree.SubElement(case, "skipped", message=f"{v.status}: {v.detail[:300]}")
    ElementTree.indent(suites)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _reproducer_text(v: Verdict) -> str:
    path = v.data.get("reproducer")
    if not path:
        return ""
    try:
        return Path(path).read_text()
    except OSError:
        return f"(reproducer not found: {path})"


HTML_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3;cursor:pointer;user-select:none}th.nosort{cursor:default}
.pass{background:#e6f5e6}.xfail{background:#fff6d6}.n\\/a{color:#888}
.fail,.xpass,.error,.crash,.timeout{background:#fde2e2}
pre{white-space:pre-wrap;background:#f8f8f8;padding:.5em;max-height:24em;overflow:auto}
details{margin:.3em 0}#filters label{margin-right:1em}
"""

HTML_SCRIPT = """
function applyFilter(){
  const on=new Set([...document.querySelectorAll('#filters input:checked')].map(i=>i.value));
  document.querySelectorAll('#cells tbody tr').forEach(r=>{
    r.style.display=on.has(r.dataset.status)?'':'none';});
  document.querySelectorAll('details.finding').forEach(d=>{
    d.style.display=on.has(d.dataset.status)?'':'none';});
}
function sortBy(th){
  const table=th.closest('table'),body=table.tBodies[0],i=[...th.parentNode.children].indexOf(th);
  const asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  const key=r=>{const t=r.children[i].dataset.key??r.children[i].textContent;
    const n=parseFloat(t);return isNaN(n)?t:n;};
  [...body.rows].sort((a,b)=>{const x=key(a),y=key(b);
    return (x>y?1:x<y?-1:0)*(asc?1:-1);}).forEach(r=>body.appendChild(r));
}
document.addEventListener('DOMContentLoaded',()=>{
  document.querySelectorAll('#filters input').forEach(i=>i.addEventListener('change',applyFilter));
  document.querySelectorAll('#cells th').forEach(th=>th.addEventListener('click',()=>sortBy(th)));
  applyFilter();
});
"""


def html_report(verdicts: list[Verdict], meta: dict | None = None) -> str:
    esc = html.escape
    versions, grid = versions_of(verdicts), _group(verdicts)
    present = [s for s in STATUSES if any(v.status == s for v in verdicts)]
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>vLLM Transformers-backend conformance</title>",
             f"<style>{HTML_STYLE}</style><script>{HTML_SCRIPT}</script></head><body>",
             "<h1>vLLM Transformers-backend conformance</h1>"]
    if meta:
        parts.append(f"<p>{esc(json.dumps(meta, sort_keys=True))}</p>")
    parts.append("<h2>Matrix</h2><table id='matrix'><tr><th class='nosort'>architecture</th>"
                 + "".join(f"<th class='nosort'>{esc(v)}</th>" for v in versions) + "</tr>")
    for fixture in fixtures_of(verdicts):
        row = [f"<td>{esc(fixture)}</td>"]
        for version in versions:
            cell = grid.get((fixture, version), [])
            worst = next((s for s in ("crash", "timeout", "error", "fail", "xpass", "xfail",
                                      "pass", "n/a") if any(v.status == s for v in cell)), "")
            row.append(f"<td class='{esc(worst)}' data-cell='{esc(fixture)}|{esc(version)}'>"
                       f"{esc(counts_text([v.status for v in cell]))}</td>")
        parts.append("<tr>" + "".join(row) + "</tr>")
    parts.append("</table><h2>Cells</h2><div id='filters'>Show: " + "".join(
        f"<label><input type='checkbox' value='{esc(s)}' checked> {esc(s)}</label>"
        for s in present) + "</div>")
    parts.append("<table id='cells'><thead><tr><th>architecture</th><th>transformers</th>"
                 "<th>subject</th><th>check</th><th>verdict</th><th>seconds</th><th>evidence</th>"
                 "</tr></thead><tbody>")
    for v in verdicts:
        parts.append(
            f"<tr class='{esc(v.status)}' data-status='{esc(v.status)}'><td>{esc(v.fixture)}</td>"
            f"<td data-key='{'.'.join(f'{n:04d}' for n in parse_version(v.version).release)}'>"
            f"{esc(v.version)}</td><td>{esc(v.subject)}</td><td>{esc(v.check)}</td>"
            f"<td>{esc(v.status)}</td><td>{v.seconds:.1f}</td><td>{esc(v.detail[:200])}</td></tr>")
    parts.append("</tbody></table><h2>Findings</h2>")
    for v in verdicts:
        if v.status in ("pass", "n/a"):
            continue
        repro = _reproducer_text(v)
        parts.append(
            f"<details class='finding' data-status='{esc(v.status)}'><summary>"
            f"<b>{esc(v.status)}</b> {esc(v.fixture)} / {esc(v.subject)} / {esc(v.check)} / "
            f"transformers {esc(v.version)}</summary><pre class='evidence'>{esc(v.detail)}</pre>"
            + (f"<p>Reproducer <code>{esc(v.data['reproducer'])}</code>:</p>"
               f"<pre class='reproducer'>{esc(repro)}</pre>" if repro else "")
            + "</details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def print_table(verdicts: list[Verdict]) -> None:
    from rich.console import Console
    from rich.table import Table

    verdicts = sort_cells(latest_per_cell(verdicts))
    versions, grid = versions_of(verdicts), _group(verdicts)
    table = Table(title="vLLM Transformers backend conformance",
                  caption="✓ pass  ✗ fail  x known  X! stale known  E error  C crash  T timeout"
                          "  – n/a")
    table.add_column("architecture")
    for version in versions:
        table.add_column(version)
    for fixture in fixtures_of(verdicts):
        cells = []
        for version in versions:
            statuses = [v.status for v in grid.get((fixture, version), [])]
            style = "red" if any(s in BAD for s in statuses) else (
                "yellow" if "xfail" in statuses else "green")
            cells.append(f"[{style}]{counts_text(statuses)}[/]")
        table.add_row(fixture, *cells)
    console = Console(width=200)
    console.print(table)
    for v in verdicts:
        if v.status in BAD:
            console.print(f"{v.status}: {v.key.label()}: {' '.join(v.detail.split())[:300]}",
                          highlight=False, markup=False)
