"""The axes every view of a run shares: cell order, versions, fixtures, checks, verdict symbols.

A view's columns are transformers versions; a run over several vLLMs has one column per
(vLLM, transformers version), labelled with both (`columns_of`, `column_of`).
"""

from __future__ import annotations

import re
from collections import Counter

from conformance.core.vllms import DEFAULT_VLLM, sort_key
from conformance.results.verdict import STATUSES, Verdict
from impl.version import parse_version

SYMBOLS = {"pass": "✓", "fail": "✗", "xfail": "x", "xpass": "X!", "inconclusive": "?",
           "error": "E", "crash": "C", "timeout": "T", "n/a": "–"}
# the status a group of cells is coloured by: the worst one among them
WORST_FIRST = ("crash", "timeout", "error", "fail", "xpass", "inconclusive", "xfail", "pass",
               "n/a")


def legend() -> str:
    return ", ".join(f"{symbol} {status}" for status, symbol in SYMBOLS.items())


def latest_per_cell(verdicts: list[Verdict]) -> list[Verdict]:
    """One verdict per cell: the last one recorded (a resumed or merged run may repeat)."""
    return list({v.key: v for v in verdicts}.values())


def sort_cells(verdicts: list[Verdict]) -> list[Verdict]:
    return sorted(verdicts, key=lambda v: (v.fixture, sort_key(v.vllm), parse_version(v.version),
                                           v.subject, v.check))


def versions_of(verdicts: list[Verdict]) -> list[str]:
    return sorted({v.version for v in verdicts}, key=parse_version)


def vllms_of(verdicts: list[Verdict]) -> list[str]:
    return sorted({v.vllm for v in verdicts}, key=sort_key)


def column_of(v: Verdict, several: bool) -> str:
    """The column a cell sits in: its transformers version, with its vLLM when a run holds
    several (`several`: vllms_of(...) has more than one)."""
    return f"{v.version} (vLLM {v.vllm})" if several else v.version


def columns_of(verdicts: list[Verdict]) -> list[str]:
    several = len(vllms_of(verdicts)) > 1
    firsts = {}
    for v in sorted(verdicts, key=lambda v: (sort_key(v.vllm), parse_version(v.version))):
        firsts.setdefault(column_of(v, several), None)
    return list(firsts)


def vllm_note(verdicts: list[Verdict]) -> str:
    """Which vLLM a run tested, for a title ("" for the default alone: no need to say it)."""
    found = vllms_of(verdicts)
    return "" if found in ([], [DEFAULT_VLLM]) else "vLLM " + ", ".join(found)


def fixtures_of(verdicts: list[Verdict]) -> list[str]:
    return list(dict.fromkeys(v.fixture for v in verdicts))


def checks_of(verdicts: list[Verdict], order: list[str] | None = None) -> list[str]:
    """The checks present, in `order` (the run's own, from its meta) where it names them."""
    present = set(v.check for v in verdicts)
    ordered = [c for c in order or () if c in present]
    return ordered + sorted(present - set(ordered))


def counts_text(statuses: list[str]) -> str:
    counts = Counter(statuses)
    return " ".join(f"{SYMBOLS[s]}{counts[s]}" for s in STATUSES if counts[s])


def worst(statuses: list[str]) -> str:
    return next((s for s in WORST_FIRST if s in statuses), "")


def anchor(fixture: str, version: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", f"{fixture}-{version}").strip("-")


def one_line(text: str, limit: int | None = 300) -> str:
    """A detail (tracebacks, multi-line evidence) folded onto one line, cut at `limit`."""
    return " ".join(text.split())[:limit]


def cells_text(count: int) -> str:
    return f"{count} cell" + ("" if count == 1 else "s")


def short_label(v: Verdict) -> str:
    """fixture/subject/check@version: a cell in a list of many (CellKey.label for one)."""
    on = "" if v.vllm == DEFAULT_VLLM else f"/vLLM {v.vllm}"
    return f"{v.fixture}/{v.subject}/{v.check}@{v.version}{on}"
