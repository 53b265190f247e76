"""report.html: one static page (no network) a person reads from the top and navigates by links.

It opens with the bad cells, each a link to its evidence, and the run in words (versions,
counts, profile, device, time, verdicts); then the findings the run met (each finding's entry,
linked to docs/findings.md where the report can reach it), per transformers version a table of
architectures x checks, the architecture x version matrix, and every cell, sortable and
filterable by verdict. Each cell has one element (its row, `cell_id`) holding its whole
evidence and the links to its reproducer and log; every symbol of the tables links to it.
"""

from __future__ import annotations

import html
import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from conformance import expectations
from conformance.core.subjects import IMPL, VLLM_BACKEND
from conformance.core.vllms import DEFAULT_VLLM, impl_follows
from conformance.expectations.document import DOCUMENT
from conformance.paths import ROOT
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
from conformance.results.markdown import finding_anchor
from conformance.results.verdict import STATUSES, Verdict, owner_line
from conformance.results.view import View, as_view
from impl.version import parse_version

if TYPE_CHECKING:
    from conformance.expectations import Finding

esc = html.escape

HTML_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3;cursor:pointer;user-select:none}th.nosort{cursor:default}
table.summary th{text-align:left;cursor:default;font-weight:normal;color:#555}
.pass{background:#e6f5e6}.xfail{background:#fff6d6}.n\\/a{color:#888}
.fail,.xpass,.inconclusive,.error,.crash,.timeout{background:#fde2e2}
.counts span{padding:2px 6px;margin-right:.4em;border-radius:3px}
table.checks td{text-align:center;white-space:nowrap}table.checks td a{padding:0 2px}
table.checks td:first-child{text-align:left}a{color:inherit}
#bad li{margin:.2em 0}#bad .cause{color:#555}
pre{white-space:pre-wrap;background:#f8f8f8;padding:.5em;max-height:16em;overflow:auto}
details{margin:.3em 0}#filters label{margin-right:1em}.cells{font-size:12px;color:#444}
#cells td.evidence{width:45%}td.evidence pre,td.evidence a{overflow-wrap:anywhere}
:target,:target>td{outline:2px solid #36c;background:#eef3ff}
"""

# Following a link to a cell: its verdict's filter is switched on (a hidden row shows) and its
# reproducer opened; then the browser scrolls to it.
HTML_SCRIPT = """
function applyFilter(){
  const on=new Set([...document.querySelectorAll('#filters input:checked')].map(i=>i.value));
  document.querySelectorAll('#cells tbody tr').forEach(r=>{
    r.style.display=on.has(r.dataset.status)?'':'none';});
}
function sortBy(th){
  const table=th.closest('table'),body=table.tBodies[0],i=[...th.parentNode.children].indexOf(th);
  const asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  const key=r=>{const t=r.children[i].dataset.key??r.children[i].textContent;
    const n=parseFloat(t);return isNaN(n)?t:n;};
  [...body.rows].sort((a,b)=>{const x=key(a),y=key(b);
    return (x>y?1:x<y?-1:0)*(asc?1:-1);}).forEach(r=>body.appendChild(r));
}
function reveal(){
  const target=document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if(!target)return;
  const box=[...document.querySelectorAll('#filters input')].find(
    i=>i.value===target.dataset.status);
  if(box&&!box.checked){box.checked=true;applyFilter();}
  target.querySelectorAll('details').forEach(d=>{d.open=true;});
  target.scrollIntoView();
}
document.addEventListener('DOMContentLoaded',()=>{
  document.querySelectorAll('#filters input').forEach(i=>i.addEventListener('change',applyFilter));
  document.querySelectorAll('#cells th').forEach(th=>th.addEventListener('click',()=>sortBy(th)));
  applyFilter();
  reveal();
});
window.addEventListener('hashchange',reveal);
"""

# The meta keys the summary words itself, or that the cells already show (the summary's rows
# from the cells: vLLM, impl, transformers, fixtures, subjects, checks)
WORDED = ("versions", "fixtures", "subjects", "checks", "profile", "device", "dtype", "finished",
          "seconds", "vllm", "impl_reference")
# Human wording of the other meta keys, in this order; a key not named here is worded from its
# name ("some_key": "some key")
LABELS = {
    "checkpoint": "checkpoint",
    "architecture": "architecture",
    "findings_of": "known findings of fixture",
    "transformers": "transformers installed",
    "environment_transformers": "transformers of the environment",
    "vllm_sources": "vLLM folders",
    "fault": "planted fault",
    "seed": "seed of the searches",
    "seeds": "seeds of the searches (one per shard)",
    "shard": "shard",
    "merged_from": "merged from",
    "baseline_of": "baseline of",
    "unmet_requirements": "requirements a version ran without (--allow-unmet)",
}
BAD_SHOWN = 25  # bad cells listed at the top; the others folded below them


def html_report(verdicts: list[Verdict] | View, meta: dict | None = None,
                folder: Path | None = None) -> str:
    """The page for a run's cells; `folder`: where it is written (its links to reproducers
    and logs are relative to it, and to docs/findings.md where it lies in this checkout)."""
    view, meta = as_view(verdicts), meta or {}
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<title>vLLM Transformers-backend conformance</title>",
             f"<style>{HTML_STYLE}</style><script>{HTML_SCRIPT}</script></head><body>",
             "<h1>vLLM Transformers-backend conformance</h1>"]
    parts += _summary(view, meta)
    parts += _findings(view, findings_document(folder))
    parts += _check_tables(view, meta.get("checks"))
    parts += _matrix(view)
    parts += _agreement(view)
    parts += _cells(view.verdicts, folder)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def cell_id(v: Verdict) -> str:
    """The id of the cell's one element (its row in the cells table), which every link to
    the cell points at."""
    on = "" if v.vllm == DEFAULT_VLLM else f"-vllm-{v.vllm}"
    name = f"{v.fixture}-{v.version}{on}-{v.subject}-{v.check}"
    return "cell-" + re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")


def findings_document(folder: Path | None) -> str | None:
    """docs/findings.md as a link from a report in `folder`: relative to it where the folder
    lies in this checkout (the default run folder, reports/runs/latest). None elsewhere (a
    scratch folder, a downloaded CI artifact): no relative link leaves such a folder, and the
    project names no URL to link to instead; there the report carries each finding's entry
    itself and names the document."""

    if folder is None or not Path(folder).resolve().is_relative_to(ROOT):
        return None
    return Path(os.path.relpath(DOCUMENT, Path(folder).resolve())).as_posix()


def _href(path: str) -> str:
    return esc(quote(path, safe="/#.-_~"))


def _text(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key}: {_text(item)}" for key, item in value.items())
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _names(values: list[str]) -> str:
    return f"{len(values)}: {', '.join(values)}"


def _meta_rows(view: View, meta: dict) -> list[tuple[str, str]]:
    """The meta the summary has not worded, each under a human label, once."""
    rows = []
    for key in [*LABELS, *sorted(set(meta) - set(LABELS))]:
        value = meta.get(key)
        if key in WORDED or value in (None, "", [], {}):
            continue
        if key == "transformers" and value in view.versions:  # the cells' own version
            continue
        rows.append((LABELS.get(key, key.replace("_", " ")), _text(value)))
    return rows


def _summary(view: View, meta: dict) -> list[str]:
    """The bad cells first, each a link to its evidence; then the run in words: what ran,
    how, when, and what came of it."""
    verdicts = view.verdicts
    rows = [("vLLM", ", ".join(view.vllms)),
            (IMPL, meta.get("impl_reference") or impl_follows(view.vllms)),
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
    rows += _meta_rows(view, meta)
    counts = Counter(v.status for v in verdicts)
    badges = "".join(f"<span class='{esc(s)}'>{esc(s)} {counts[s]}</span>"
                     for s in STATUSES if counts[s])
    return (["<section id='summary'>"] + _bad(view.bad)
            + ["<table class='summary'>"]
            + [f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows]
            + [f"<tr><th>verdicts</th><td class='counts'>{badges}</td></tr></table></section>"])


def _bad(bad: list[Verdict]) -> list[str]:
    """The cells that need a look, worst first, each a link to its evidence."""
    if not bad:
        return ["<p id='bad'>No bad cell: every cell passed, failed as a known finding "
                "explains (xfail), or does not apply (n/a).</p>"]
    items = [f"<li class='{esc(v.status)}'><a href='#{cell_id(v)}'><b>{esc(v.status)}</b> "
             f"{esc(v.key.label())}</a>: <span class='cause'>{esc(one_line(v.detail))}</span>"
             "</li>" for v in bad]
    parts = [f"<h2>Bad cells ({len(bad)})</h2>",
             "<p>Failed, stale (xpass: a known finding no longer shows), inconclusive, or did "
             "not run (error, crash, timeout); each links to its evidence.</p>",
             "<ol id='bad'>", *items[:BAD_SHOWN], "</ol>"]
    if len(items) > BAD_SHOWN:
        parts += [f"<details><summary>{len(items) - BAD_SHOWN} more</summary>"
                  f"<ol id='bad-more' start='{BAD_SHOWN + 1}'>", *items[BAD_SHOWN:],
                  "</ol></details>"]
    return parts


def _cell_links(cells: tuple[Verdict, ...] | list[Verdict]) -> str:
    return ", ".join(f"<a href='#{cell_id(v)}'>{esc(short_label(v))}</a>" for v in cells)


def _findings(view: View, document: str | None) -> list[str]:
    """The findings the run met (its xfail and xpass cells), one row each: the finding's
    entry (from findings.toml) and its cells, folded away."""

    groups, unnamed = view.known
    stale: dict[str, list[Verdict]] = {}
    for v in view.verdicts:
        if v.status == "xpass" and v.finding:
            stale.setdefault(v.finding, []).append(v)
    known = {g.finding: g.cells for g in groups}
    ids = list(known) + [i for i in stale if i not in known]
    if not ids and not unnamed:
        return []
    entries = {f.id: f for f in expectations.load()}
    parts = ["<h2 id='findings'>Known findings</h2>",
             "<p>Each finding is written out in full in the repository's "
             + (f"<a href='{_href(document)}'>docs/findings.md</a>" if document else
                "<code>docs/findings.md</code>")
             + ".</p><table id='known'><thead><tr><th class='nosort'>finding</th>"
             "<th class='nosort'>title</th><th class='nosort'>cells</th></tr></thead><tbody>"]
    for finding in ids:
        entry = entries.get(finding)
        title = entry.title if entry else "(not in this checkout's findings.toml)"
        cells = known.get(finding, ())
        where = [f"<details><summary>{cells_text(len(cells))} xfail</summary>"
                 f"<span class='cells'>{_cell_links(cells)}</span></details>"] if cells else []
        if finding in stale:
            where.append(f"<p class='xpass'>stale (xpass) in {cells_text(len(stale[finding]))}"
                         f": {_cell_links(stale[finding])}</p>")
        parts.append(f"<tr id='{finding_anchor(finding)}' data-finding='{esc(finding)}'>"
                     f"<td><code>{esc(finding)}</code></td>"
                     f"<td>{esc(title)}{_entry(entry, document)}</td>"
                     f"<td>{''.join(where)}</td></tr>")
    if unnamed:
        parts.append("<tr><td></td><td>xfail without a finding id (recorded before verdicts "
                     f"named one)</td><td><details><summary>{cells_text(len(unnamed))}</summary>"
                     f"<span class='cells'>{_cell_links(unnamed)}</span></details></td></tr>")
    return parts + ["</tbody></table>"]


def _entry(finding: Finding | None, document: str | None) -> str:
    """A finding's entry as docs/findings.md gives it, in short: its bounds, reason and
    upstream reports, and where the whole entry is."""
    if finding is None:
        return ""
    upstream = ", ".join(f"<a href='{esc(url)}'>{esc(url)}</a>" for url in finding.upstream)
    place = f"docs/findings.md#{finding.id}"
    whole = (f"<a href='{_href(document)}#{_href(finding.id)}'>{esc(place)}</a>" if document
             else f"<code>{esc(place)}</code> in the repository")
    return ("<details class='entry'><summary>the finding</summary><ul>"
            f"<li>transformers: {esc(finding.describe_versions())}</li>"
            f"<li>vLLM: {esc(finding.describe_versions(finding.vllm))}</li>"
            f"<li>upstream: {upstream or 'none known'}</li></ul>"
            f"<p>{esc(finding.reason)}</p><p>The whole entry: {whole}.</p></details>")


def _tooltip(v: Verdict) -> str:
    finding = f" [{v.finding}]" if v.finding else ""
    return f"{v.subject}: {v.status}{finding}" + (f": {one_line(v.detail)}" if v.detail else "")


def _check_tables(view: View, order: list[str] | None) -> list[str]:
    """Per transformers version, architectures x checks: each cell coloured by its worst
    verdict, one symbol per subject, each a link to that cell's evidence."""
    subjects = ", ".join(sorted({v.subject for v in view.verdicts}))
    parts = ["<h2>Architectures x checks</h2>",
             f"<p>One symbol per subject ({esc(subjects)}, in that order; a checkpoint-level "
             f"check runs once): {esc(legend())}. Each symbol links to its cell's evidence.</p>"]
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
                marks = "".join(f"<a class='{esc(v.status)}' href='#{cell_id(v)}' "
                                f"title='{esc(_tooltip(v))}'>{SYMBOLS[v.status]}</a>"
                                for v in group)
                row.append(f"<td class='{esc(status)}' data-status='{esc(status)}' "
                           f"data-fixture='{esc(fixture)}' data-check='{esc(check)}' title='"
                           f"{esc(chr(10).join(_tooltip(v) for v in group))}'>{marks}</td>")
            parts.append("<tr>" + "".join(row) + "</tr>")
        parts.append("</table>")
    return parts


def _matrix(view: View) -> list[str]:
    """Architecture x version: each cell's counts link to the cell that colours it (its worst;
    the group's other cells sit beside it in the cells table)."""
    versions, grid = view.columns, view.grid
    parts = ["<h2>Matrix</h2><table id='matrix'><tr><th class='nosort'>architecture</th>"
             + "".join(f"<th class='nosort'>{esc(v)}</th>" for v in versions) + "</tr>"]
    for fixture in view.fixtures:
        row = [f"<td>{esc(fixture)}</td>"]
        for version in versions:
            group = grid.get((fixture, version), [])
            statuses = [v.status for v in group]
            status = worst(statuses)
            text = esc(counts_text(statuses))
            if group:
                first = next(v for v in group if v.status == status)
                text = f"<a href='#{cell_id(first)}'>{text}</a>"
            row.append(f"<td class='{esc(status)}' data-cell='{esc(fixture)}|"
                       f"{esc(version)}'>{text}</td>")
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
    backend = {(v.fixture, v.check, column): v for (_, column), group in view.grid.items()
               for v in group if v.subject == VLLM_BACKEND}
    for fixture, check, words in rows:
        row = [f"<td>{esc(fixture)}</td><td>{esc(check)}</td>"]
        for column, word in zip(columns, words, strict=True):
            cell = backend.get((fixture, check, column))
            text = f"<a href='#{cell_id(cell)}'>{esc(word)}</a>" if cell and word else esc(word)
            row.append(f"<td data-relation='{esc(word)}' "
                       f"title='{esc(RELATIONS.get(word, ''))}'>{text}</td>")
        parts.append("<tr>" + "".join(row) + "</tr>")
    return parts + ["</table>"]


def _cells(verdicts: list[Verdict], folder: Path | None) -> list[str]:
    """Every cell, one row each (`cell_id`), with its whole evidence and its files."""
    present = [s for s in STATUSES if any(v.status == s for v in verdicts)]
    parts = ["<h2>Cells</h2><div id='filters'>Show: " + "".join(
        f"<label><input type='checkbox' value='{esc(s)}' checked> {esc(s)}</label>"
        for s in present) + "</div>",
        "<table id='cells'><thead><tr><th>architecture</th><th>vLLM</th><th>transformers</th>"
        "<th>subject</th><th>check</th><th>verdict</th><th>finding</th><th>seconds</th>"
        "<th>evidence</th></tr></thead><tbody>"]
    for v in verdicts:
        finding = (f"<a href='#{finding_anchor(v.finding)}'>{esc(v.finding)}</a>"
                   if v.finding else "")
        parts.append(
            f"<tr id='{cell_id(v)}' class='{esc(v.status)}' data-status='{esc(v.status)}'>"
            f"<td>{esc(v.fixture)}</td><td>{esc(v.vllm)}</td>"
            f"<td data-key='{'.'.join(f'{n:04d}' for n in parse_version(v.version).release)}'>"
            f"{esc(v.version)}</td><td>{esc(v.subject)}</td><td>{esc(v.check)}</td>"
            f"<td>{esc(v.status)}</td><td>{finding}</td><td>{v.seconds:.1f}</td>"
            f"<td class='evidence'>{_evidence(v, folder)}</td></tr>")
    return parts + ["</tbody></table>"]


def _evidence(v: Verdict, folder: Path | None) -> str:
    """A cell's whole evidence, its log and its reproducer (linked, and its text)."""
    parts = [f"<p class='owner'>{esc(owner)}</p>"] if (owner := owner_line(v)) else []
    parts += [f"<pre class='evidence'>{esc(v.detail)}</pre>"] if v.detail else []
    if v.log:  # the cell's whole output
        parts.append(f"<p>Log: <a class='log' href='{_href(v.log)}'>{esc(v.log)}</a></p>")
    if path := v.data.get("reproducer"):
        parts.append(f"<p>Reproducer: <a class='reproducer' href='{_href(path)}'>{esc(path)}"
                     "</a></p><details><summary>its text</summary>"
                     f"<pre class='reproducer'>{esc(_reproducer_text(path, folder))}</pre>"
                     "</details>")
    return "".join(parts)


def _reproducer_text(path: str, folder: Path | None) -> str:
    """The reproducer's text, read where the report's link points (relative to its folder;
    without one, relative to the repository, as the committed baseline records it)."""

    try:
        return (Path(folder or ROOT) / path).read_text()
    except OSError:
        return f"(reproducer not found: {path})"
