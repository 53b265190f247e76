"""Results on disk and the reports made from them: JSON, Markdown, HTML and JUnit XML.

While a run goes, verdicts are appended to `results.jsonl` (what `--resume` reads back). At the
end `results.json` (schema: reports/README.md) and the three reports are written beside it; each
report has its own module (markdown, html_page, junit), re-exported here.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from conformance.results.cells import (
    SYMBOLS,
    anchor,
    counts_text,
    fixtures_of,
    latest_per_cell,
    one_line,
    sort_cells,
    versions_of,
)
from conformance.results.html_page import html_report
from conformance.results.judge import upgrade
from conformance.results.junit import junit
from conformance.results.markdown import markdown
from conformance.results.portable import folder_cell, folder_cells, folder_meta
from conformance.results.verdict import BAD, Verdict
from conformance.results.view import View, as_view

__all__ = ["SCHEMA_VERSION", "SYMBOLS", "anchor", "append", "counts_text", "fixtures_of",
           "html_report", "junit", "latest_per_cell", "markdown", "print_table", "read_partial",
           "read_results", "sort_cells", "versions_of", "write_reports", "write_results"]

# 2: a verdict's evidence as data (`evidence`, results/evidence.py), its line rendered from it;
# 1: the evidence as text in `detail` and data["differences"] (read back by `judge.upgrade`)
SCHEMA_VERSION = 2


def append(path: Path, verdict: Verdict) -> None:
    """One verdict more in a run folder's results.jsonl, its paths relative to the folder."""
    with open(path, "a") as stream:
        stream.write(folder_cell(verdict, path.parent).to_json() + "\n")


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
    return [Verdict.from_dict(cell) for cell in cells_of(payload, path)], payload.get("meta", {})


def cells_of(payload: dict, path: Path) -> list[dict]:
    """A results file's cells as this schema writes them (schema 1's upgraded)."""
    schema = payload.get("schema_version")
    if schema == 1:
        return [upgrade(cell) for cell in payload["cells"]]
    if schema != SCHEMA_VERSION:
        raise ValueError(f"{path}: results schema {schema}, this tool reads "
                         f"{SCHEMA_VERSION} (and 1)")
    return payload["cells"]


def write_results(path: Path, verdicts: list[Verdict], meta: dict) -> None:
    payload = {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "summary": dict(sorted(Counter(v.status for v in verdicts).items())),
        "cells": [json.loads(v.to_json()) for v in sort_cells(verdicts)],
    }
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def write_reports(run_dir: Path, verdicts: list[Verdict], meta: dict) -> None:
    """results.json and the reports in `run_dir`, every path in them relative to it."""
    # grouped once for every writer
    view = View(folder_cells(verdicts, run_dir))
    meta = folder_meta(meta, run_dir)
    write_results(run_dir / "results.json", view.verdicts, meta)
    (run_dir / "report.md").write_text(markdown(view, meta))
    (run_dir / "report.html").write_text(html_report(view, meta, run_dir))
    (run_dir / "junit.xml").write_text(junit(view))


def print_table(verdicts: list[Verdict] | View) -> None:
    from rich.console import Console
    from rich.table import Table

    view = as_view(verdicts)
    verdicts, versions, grid, note = view.verdicts, view.columns, view.grid, view.note
    table = Table(title="vLLM Transformers backend conformance" + (f" ({note})" if note else ""),
                  caption="✓ pass  ✗ fail  x known  X! stale known  E error  C crash  T timeout"
                          "  – n/a")
    table.add_column("architecture")
    for version in versions:
        table.add_column(version)
    for fixture in view.fixtures:
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
            console.print(f"{v.status}: {v.key.label()}: {one_line(v.detail)}",
                          highlight=False, markup=False, soft_wrap=True)  # a CI log: unwrapped
