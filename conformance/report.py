"""Results on disk (JSON lines while running, results.json at the end) and the verdict table."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from conformance.verdict import BAD, Verdict

SCHEMA_VERSION = 1


def append(path: Path, verdict: Verdict) -> None:
    with open(path, "a") as stream:
        stream.write(verdict.to_json() + "\n")


def read_partial(path: Path) -> list[Verdict]:
    if not path.exists():
        return []
    return [Verdict.from_json(line) for line in path.read_text().splitlines() if line.strip()]


def write_results(path: Path, verdicts: list[Verdict], meta: dict) -> None:
    payload = {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "summary": dict(Counter(v.status for v in verdicts)),
        "cells": [json.loads(v.to_json()) for v in verdicts],
    }
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def table_rows(verdicts: list[Verdict]) -> tuple[list[str], list[list[str]]]:
    """Rows: fixture x check; columns: versions; cells: status."""
    versions = sorted({v.version for v in verdicts}, key=lambda s: tuple(map(int, s.split("."))))
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for v in verdicts:
        rows.setdefault((v.fixture, v.check), {})[v.version] = v.status
    body = [[f, c, *(cells.get(ver, "") for ver in versions)] for (f, c), cells in rows.items()]
    return ["architecture", "check", *versions], body


def markdown(verdicts: list[Verdict]) -> str:
    header, body = table_rows(verdicts)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    details = [v for v in verdicts if v.status not in ("pass", "n/a")]
    if details:
        lines += ["", "## Details", ""]
        for v in details:
            text = v.detail.replace("\n", " ")[:600]
            lines.append(f"- **{v.fixture} / {v.check} / transformers {v.version}: {v.status}**"
                         f" {text}")
    counts = Counter(v.status for v in verdicts)
    lines += ["", "Totals: " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts))]
    return "\n".join(lines) + "\n"


def print_table(verdicts: list[Verdict]) -> None:
    from rich.console import Console
    from rich.table import Table

    styles = {"pass": "green", "xfail": "yellow", "n/a": "dim"}
    header, body = table_rows(verdicts)
    table = Table(title="native vLLM vs Transformers backend (oracle smoke)")
    for name in header:
        table.add_column(name)
    for row in body:
        table.add_row(*row[:2], *(f"[{styles.get(s, 'bold red')}]{s}[/]" for s in row[2:]))
    console = Console(width=160)
    console.print(table)
    for v in verdicts:
        if v.status in BAD or v.status == "xfail":
            console.print(f"{v.fixture} / {v.check} / {v.version}: {v.status}: {v.detail[:400]}",
                          highlight=False, markup=False)
