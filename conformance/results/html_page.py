"""report.html: one static page (no network) a person reads from the top.

It opens with the run in words (versions, counts, profile, device, time, verdicts, the known
findings), then per transformers version a table of architectures x checks, the architecture x
version matrix, every cell sortable and filterable by verdict, and each non-passing cell's
evidence and reproducer.
"""

from __future__ import annotations

import html
from collections import Counter

from conformance.core.subjects import IMPL
from conformance.core.vllms import IMPL_REFERENCE
from conformance.results.agreement import RELATIONS, summary_line, table_rows
from conformance.results.cells import (
    SYMBOLS,
    anchor,
    cells_text,
    checks_of,
    counts_text,
    fixtures_of,
    legend,
    one_line,
    short_label,
    worst,
)
from conformance.results.known import KnownGroup
from conformance.results.verdict import STATUSES, Verdict
from conformance.results.view import View, as_view
from impl.version import parse_version

esc = html.escape

HTML_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3;cursor:pointer;user-select:none}th.nosort{cursor:default}
table.summary th{text-align:left;cursor:default;font-weight:normal;color:#555}
.pass{background:#e6f5e6}.xfail{background:#fff6d6}.n\\/a{color:#888}
.fail,.xpass,.inconclusive,.error,.crash,.timeout{background:#fde2e2}
.counts span{padding:2px 6px;margin-right:.4em;border-radius:3px}
table.checks td{text-align:center;white-space:nowrap}table.checks td span{padding:0 2px}
table.checks td:first-child{text-align:left}
pre{white-space:pre-wrap;background:#f8f8f8;padding:.5em;max-height:24em;overflow:auto}
details{margin:.3em 0}#filters label{margin-right:1em}.cells{font-size:12px;color:#444}
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

# meta keys the summary words itself; any other key is listed as it is
WORDED = ("versions", "fixtures", "subjects", "checks", "profile", "device", "dtype", "finished",
          "seconds")


def html_report(verdicts: list[Verdict] | View, meta: dict | None = None) -> str:
    view, meta = as_view(verdicts), meta or {}
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>vLLM Transformers-backend conformance</title>",
             f"<style>{HTML_STYLE}</style><script>{HTML_SCRIPT}</script></head><body>",
             "<h1>vLLM Transformers-backend conformance</h1>"]
    parts += _summary(view, meta)
    parts += _known(*view.known)
    parts += _check_tables(view, meta.get("checks"))
    parts += _matrix(view)
    parts += _agreement(view)
    parts += _cells(view.verdicts)
    parts += _evidence(view.verdicts)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _text(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _names(values: list[str]) -> str:
    return f"{len(values)}: {', '.join(values)}"


def _summary(view: View, meta: dict) -> list[str]:
    """The run in words: what ran, how, when, and what came of it."""
    verdicts = view.verdicts
    rows = [("vLLM", ", ".join(view.vllms)),
            (IMPL, f"the reference of vLLM {IMPL_REFERENCE}'s backend"),
            ("transformers", ", ".join(view.versions)),
            ("fixtures", _names(view.fixtures)),
            ("subjects", _names(list(dict.fromkeys(v.subject for v in verdicts)))),
            ("checks", _names(checks_of(verdicts, meta.get("checks"))))]
    if meta.get("profile"):
        rows.append(("profile", str(meta["profile"])))
    if meta.get("device") or meta.get("dtype"):
        rows.append(("device / dtype", f"{meta.get('device', '?')} / {meta.get('dtype', '?')}"))
    if meta.get("finished"):
        rows.append(("finished", str(meta["finished"])))
    if meta.get("seconds") is not None:
        rows.append(("run time", f"{meta['seconds']:.0f} s for {len(verdicts)} cells"))
    rows += [(key, _text(value)) for key, value in sorted(meta.items())
             if key not in WORDED and value not in (None, "", [])]
    counts = Counter(v.status for v in verdicts)
    badges = "".join(f"<span class='{esc(s)}'>{esc(s)} {counts[s]}</span>"
                     for s in STATUSES if counts[s])
    return (["<section id='summary'><table class='summary'>"]
            + [f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows]
            + [f"<tr><th>verdicts</th><td class='counts'>{badges}</td></tr></table></section>"])


def _known(groups: list[KnownGroup], unnamed: list[Verdict]) -> list[str]:
    """The known findings the run met: one row each, its cells folded away."""
    if not groups and not unnamed:
        return []
    rows = [(g.finding, g.title, g.cells) for g in groups]
    if unnamed:
        rows.append(("", "xfail without a finding id (recorded before verdicts named one)",
                     tuple(unnamed)))
    parts = ["<h2>Known findings</h2><table id='known'><thead><tr><th class='nosort'>finding"
             "</th><th class='nosort'>title</th><th class='nosort'>cells</th></tr></thead>"
             "<tbody>"]
    for finding, title, cells in rows:
        labels = ", ".join(short_label(v) for v in cells)
        parts.append(f"<tr data-finding='{esc(finding)}'><td><code>{esc(finding)}</code></td>"
                     f"<td>{esc(title)}</td><td><details><summary>{cells_text(len(cells))}</summary>"
                     f"<span class='cells'>{esc(labels)}</span></details></td></tr>")
    return parts + ["</tbody></table>"]


def _tooltip(v: Verdict) -> str:
    finding = f" [{v.finding}]" if v.finding else ""
    return f"{v.subject}: {v.status}{finding}" + (f": {one_line(v.detail)}" if v.detail else "")


def _check_tables(view: View, order: list[str] | None) -> list[str]:
    """Per transformers version, architectures x checks: each cell coloured by its worst
    verdict, one symbol per subject, the details in the tooltips."""
    subjects = ", ".join(sorted({v.subject for v in view.verdicts}))
    parts = ["<h2>Architectures x checks</h2>",
             f"<p>One symbol per subject ({esc(subjects)}, in that order; a checkpoint-level "
             f"check runs once): {esc(legend())}. Hover over a cell for its evidence.</p>"]
    for version in view.columns:
        cells = view.by_column[version]
        checks = checks_of(cells, order)
        grid: dict[tuple[str, str], list[Verdict]] = {}
        for v in cells:
            grid.setdefault((v.fixture, v.check), []).append(v)
        slug = esc(anchor("v", version))
        parts.append(f"<h3 id='checks-{slug}'>transformers {esc(version)}</h3>"
                     f"<table class='checks' data-version='{esc(version)}'><tr>"
                     "<th class='nosort'>architecture</th>"
                     + "".join(f"<th class='nosort'>{esc(c)}</th>" for c in checks) + "</tr>")
        for fixture in fixtures_of(cells):
            row = [f"<td>{esc(fixture)}</td>"]
            for check in checks:
                group = sorted(grid.get((fixture, check), []), key=lambda v: v.subject)
                status = worst([v.status for v in group])
                marks = "".join(f"<span class='{esc(v.status)}' title='{esc(_tooltip(v))}'>"
                                f"{SYMBOLS[v.status]}</span>" for v in group)
                row.append(f"<td class='{esc(status)}' data-status='{esc(status)}' "
                           f"data-fixture='{esc(fixture)}' data-check='{esc(check)}' title='"
                           f"{esc(chr(10).join(_tooltip(v) for v in group))}'>{marks}</td>")
            parts.append("<tr>" + "".join(row) + "</tr>")
        parts.append("</table>")
    return parts


def _matrix(view: View) -> list[str]:
    versions, grid = view.columns, view.grid
    parts = ["<h2>Matrix</h2><table id='matrix'><tr><th class='nosort'>architecture</th>"
             + "".join(f"<th class='nosort'>{esc(v)}</th>" for v in versions) + "</tr>"]
    for fixture in view.fixtures:
        row = [f"<td>{esc(fixture)}</td>"]
        for version in versions:
            statuses = [v.status for v in grid.get((fixture, version), [])]
            row.append(f"<td class='{esc(worst(statuses))}' data-cell='{esc(fixture)}|"
                       f"{esc(version)}'>{esc(counts_text(statuses))}</td>")
        parts.append("<tr>" + "".join(row) + "</tr>")
    return parts + ["</table>"]


def _agreement(view: View) -> list[str]:
    """Per model-level cell of the backend, which references agree (`results.agreement`)."""
    found = view.relations
    if not found:
        return []
    columns, rows = table_rows(found, view.columns)
    legend_items = "".join(f"<li><b>{esc(w)}</b>: {esc(t)}</li>" for w, t in RELATIONS.items())
    parts = ["<h2 id='references'>Which references agree</h2>",
             f"<p>Model-level cells of the backend: {esc(summary_line(found))}.</p>",
             f"<details><summary>legend</summary><ul>{legend_items}</ul></details>",
             "<table id='agreement'><tr><th class='nosort'>architecture</th>"
             "<th class='nosort'>check</th>"
             + "".join(f"<th class='nosort'>{esc(c)}</th>" for c in columns) + "</tr>"]
    for fixture, check, words in rows:
        parts.append(f"<tr><td>{esc(fixture)}</td><td>{esc(check)}</td>" + "".join(
            f"<td data-relation='{esc(w)}' title='{esc(RELATIONS.get(w, ''))}'>{esc(w)}</td>"
            for w in words) + "</tr>")
    return parts + ["</table>"]


def _cells(verdicts: list[Verdict]) -> list[str]:
    present = [s for s in STATUSES if any(v.status == s for v in verdicts)]
    parts = ["<h2>Cells</h2><div id='filters'>Show: " + "".join(
        f"<label><input type='checkbox' value='{esc(s)}' checked> {esc(s)}</label>"
        for s in present) + "</div>",
        "<table id='cells'><thead><tr><th>architecture</th><th>vLLM</th><th>transformers</th>"
        "<th>subject</th><th>check</th><th>verdict</th><th>finding</th><th>seconds</th>"
        "<th>evidence</th></tr></thead><tbody>"]
    for v in verdicts:
        parts.append(
            f"<tr class='{esc(v.status)}' data-status='{esc(v.status)}'><td>{esc(v.fixture)}</td>"
            f"<td>{esc(v.vllm)}</td>"
            f"<td data-key='{'.'.join(f'{n:04d}' for n in parse_version(v.version).release)}'>"
            f"{esc(v.version)}</td><td>{esc(v.subject)}</td><td>{esc(v.check)}</td>"
            f"<td>{esc(v.status)}</td><td>{esc(v.finding)}</td><td>{v.seconds:.1f}</td>"
            f"<td>{esc(v.detail[:200])}</td></tr>")
    return parts + ["</tbody></table>"]


def _reproducer_text(path: str) -> str:
    from conformance.paths import ROOT

    try:  # a committed report records it relative to the repository
        return (ROOT / path).read_text()
    except OSError:
        return f"(reproducer not found: {path})"


def _evidence(verdicts: list[Verdict]) -> list[str]:
    """Each non-passing cell's whole evidence, and its reproducer's text where one was written."""
    parts = ["<h2>Evidence per cell</h2>"]
    for v in verdicts:
        if v.status in ("pass", "n/a"):
            continue
        path = v.data.get("reproducer")
        finding = f" <code>{esc(v.finding)}</code>" if v.finding else ""
        parts.append(
            f"<details class='finding' data-status='{esc(v.status)}'><summary>"
            f"<b>{esc(v.status)}</b>{finding} {esc(v.fixture)} / {esc(v.subject)} / "
            f"{esc(v.check)} / transformers {esc(v.version)} / vLLM {esc(v.vllm)}</summary>"
            f"<pre class='evidence'>{esc(v.detail)}</pre>"
            + (f"<p>Reproducer <code>{esc(path)}</code>:</p>"
               f"<pre class='reproducer'>{esc(_reproducer_text(path))}</pre>" if path else "")
            + "</details>")
    return parts
